"""The service the API calls: inputs -> tokenize -> encode -> unit vectors + token usage.

Knows nothing of HTTP; `loading.py` builds it (the init phase), whose contract check
(fingerprint.py) sets `EmbeddingService.fingerprint`. Inputs longer than the contract's
length are cut and counted (`Embeddings.truncated`), or refused when the request asks not to
truncate (InputTooLongError, naming the first such input, its token count and the limit).
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .bundle import Manifest
from .encoder import OnnxEncoder
from .errors import InputTooLongError, ModelLoadError, SiglipError
from .json_value import JSONObject
from .tokenization import COUNT_CHARS, SiglipTokenizer, Token, TokenBatch

if TYPE_CHECKING:
    from .limits import Deadline

PROBE_TEXT = "a photo of a cat"


@dataclass(frozen=True)
class TextInputs:
    """Texts, tokenized by the bundle's tokenizer under the contract."""

    items: Sequence[str]


@dataclass(frozen=True)
class TokenIdInputs:
    """Token-id sequences of the bundle's own vocabulary, taken as given."""

    items: Sequence[Sequence[int]]


#: What a request asks to embed: decided once, where the request is validated.
Inputs = TextInputs | TokenIdInputs


@dataclass(frozen=True)
class Embeddings:
    """Unit vectors in input order and the tokens actually fed for each input."""

    vectors: np.ndarray  # float32 [n, D], L2-normalized
    token_counts: list[int]
    cache_hits: int = 0
    truncated: int = 0  # inputs cut to the contract's length (counted, never logged)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.token_counts)


@dataclass
class InitTimings:
    """Seconds spent in each part of the init phase (in the init log and the benchmark)."""

    manifest_s: float = 0.0
    tokenizer_s: float = 0.0
    session_s: float = 0.0
    session_wait_s: float = 0.0  # the init's wait for the session after the tokenizer
    probe_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return {
            "manifest_s": round(self.manifest_s, 4),
            "tokenizer_s": round(self.tokenizer_s, 4),
            "session_s": round(self.session_s, 4),
            "session_wait_s": round(self.session_wait_s, 4),
            "probe_s": round(self.probe_s, 4),
            **{k: round(v, 4) for k, v in self.extra.items()},
        }


#: What an entry costs beyond its key and vector objects: the tuple, the token count and the
#: OrderedDict's slot (CPython, 64-bit).
ENTRY_OVERHEAD_BYTES = 160


def text_key(text: str) -> bytes:
    """The cache key of a text: its SHA-256, so the cache holds no query text and an entry's
    size does not depend on the text's (lone surrogates, which JSON allows, kept as such)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


#: A cached text: its vector, its token count, and whether the text was cut.
CacheEntry = tuple[np.ndarray, int, bool]


class _VectorCache:
    """A thread-safe LRU of SHA-256(text) -> (vector, token count, cut), bounded in entries
    and in bytes (keys, vectors and their bookkeeping)."""

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[bytes, CacheEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> CacheEntry | None:
        key = text_key(text)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item

    def put(self, text: str, vector: np.ndarray, tokens: int, *, truncated: bool = False) -> None:
        key = text_key(text)
        cost = _entry_bytes(key, vector)
        if cost > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= _entry_bytes(key, old[0])
            self._items[key] = (vector, tokens, truncated)
            self.bytes += cost
            while len(self._items) > self.size or self.bytes > self.max_bytes:
                evicted, (evicted_vector, _, _) = self._items.popitem(last=False)
                self.bytes -= _entry_bytes(evicted, evicted_vector)


def _entry_bytes(key: bytes, vector: np.ndarray) -> int:
    return sys.getsizeof(key) + sys.getsizeof(vector) + ENTRY_OVERHEAD_BYTES


class EmbeddingService:
    """Turns texts or token-id sequences into SigLIP 2 text vectors."""

    def __init__(
        self,
        manifest: Manifest,
        tokenizer: SiglipTokenizer,
        encoder: OnnxEncoder,
        *,
        cache_size: int = 0,
        cache_max_bytes: int = 0,
        init_timings: InitTimings | None = None,
    ) -> None:
        self.manifest = manifest
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.init_timings = init_timings or InitTimings()
        #: The contract fingerprint of what is served (``sha256:`` + 64 hex), set by init's
        #: contract check (fingerprint.check_contract); None only before it ran.
        self.fingerprint: str | None = None
        #: Seconds per input the init's probe measured on this CPU: the faster of its two
        #: runs of one input each, tokenization and model (`probe`); None before it ran. The
        #: time side of the most inputs a request may hold (http/inputs_bound.py).
        self.probe_seconds_per_input: float | None = None
        self._cache = (
            _VectorCache(cache_size, cache_max_bytes)
            if cache_size > 0 and cache_max_bytes > 0
            else None
        )

    @property
    def model_id(self) -> str:
        return self.manifest.repository

    @property
    def revision(self) -> str:
        return self.manifest.revision

    @property
    def dimension(self) -> int:
        return self.manifest.embedding_dimension

    @property
    def max_tokens(self) -> int:
        return self.manifest.text_max_token_length

    @property
    def intra_op_threads(self) -> int:
        """The threads the ONNX Runtime session was built with (what the init log reports)."""
        return self.encoder.intra_op_threads

    def embed(
        self, inputs: Inputs, deadline: Deadline | None = None, *, truncate: bool = True
    ) -> Embeddings:
        """Embed texts or token-id sequences, whichever the inputs are; a ``deadline`` stops
        the model between chunks when the rest cannot finish in time (limits.py). With
        ``truncate`` False, an input over the contract's length is refused before the model
        runs."""
        if isinstance(inputs, TextInputs):
            return self.embed_texts(inputs.items, deadline, truncate=truncate)
        return self.embed_token_ids(inputs.items, deadline, truncate=truncate)

    def embed_texts(
        self, texts: Sequence[str], deadline: Deadline | None = None, *, truncate: bool = True
    ) -> Embeddings:
        """Embed texts; with a cache, repeated texts skip tokenization and the model."""
        if self._cache is None:
            self._before_the_work(len(texts), deadline)
            batch = self.tokenizer.encode_texts(texts)
            if not truncate:
                self._refuse_cut_texts(texts, batch.truncated)
            return self._run(batch, deadline)
        cached = [self._cache.get(t) for t in texts]
        missing = [i for i, item in enumerate(cached) if item is None]
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        counts = [0] * len(texts)
        cut = [item is not None and item[2] for item in cached]
        if missing:
            self._before_the_work(len(missing), deadline)
            batch = self.tokenizer.encode_texts([texts[i] for i in missing])
            for row, i in enumerate(missing):
                cut[i] = batch.truncated[row]
            if not truncate:
                self._refuse_cut_texts(texts, cut)
            fresh = self._run(batch, deadline)
            for row, i in enumerate(missing):
                vector = fresh.vectors[row].copy()
                vector.setflags(write=False)
                self._cache.put(
                    texts[i], vector, fresh.token_counts[row], truncated=batch.truncated[row]
                )
                vectors[i], counts[i] = vector, fresh.token_counts[row]
        elif not truncate:
            self._refuse_cut_texts(texts, cut)
        for i, item in enumerate(cached):
            if item is not None:
                vectors[i], counts[i] = item[0], item[1]
        return Embeddings(vectors, counts, cache_hits=len(texts) - len(missing), truncated=sum(cut))

    def embed_token_ids(
        self,
        sequences: Sequence[Sequence[int]],
        deadline: Deadline | None = None,
        *,
        truncate: bool = True,
    ) -> Embeddings:
        """Embed token-id sequences taken as given (no EOS added), truncated and padded."""
        self._before_the_work(len(sequences), deadline)
        batch = self.tokenizer.encode_token_ids(sequences)
        if not truncate and any(batch.truncated):
            first = batch.truncated.index(True)
            raise self._too_long(first, f"{len(sequences[first])} token ids")
        return self._run(batch, deadline)

    def tokenize(
        self, texts: Sequence[str], *, add_special_tokens: bool = True
    ) -> list[list[Token]]:
        """What the model is fed for each text, as token objects (``POST /tokenize``)."""
        return self.tokenizer.tokens(texts, add_special_tokens=add_special_tokens)

    def _refuse_cut_texts(self, texts: Sequence[str], cut: Sequence[bool]) -> None:
        """The first text that was cut, refused with its whole token count."""
        if any(cut):
            first = list(cut).index(True)
            count, exact = self.tokenizer.count_tokens(texts[first])
            found = (
                f"{count} tokens"
                if exact
                else f"{count - 1} tokens in its first {COUNT_CHARS} characters alone"
            )
            raise self._too_long(first, found)

    def _too_long(self, index: int, found: str) -> InputTooLongError:
        return InputTooLongError(
            f"input[{index}] has {found}, over this model's limit of {self.max_tokens} tokens "
            f"({self.max_tokens - 1} of a text and <eos>); shorten it, or send 'truncate': true "
            "(the default) to embed its first tokens",
            param=f"input[{index}]",
        )

    def _before_the_work(self, rows: int, deadline: Deadline | None) -> None:
        """The deadline's check before tokenization (the encoder checks again per chunk)."""
        if deadline is not None and rows:
            deadline.check(
                rows_left=rows,
                next_rows=min(rows, self.encoder.max_batch_size),
                total=rows,
                pace=self.encoder.pace,
            )

    def _run(self, batch: TokenBatch, deadline: Deadline | None = None) -> Embeddings:
        return Embeddings(
            self.encoder.encode(batch.ids, deadline), batch.lengths, truncated=sum(batch.truncated)
        )

    def cache_stats(self) -> dict[str, int] | None:
        if self._cache is None:
            return None
        return {"size": self._cache.size, "hits": self._cache.hits, "misses": self._cache.misses}

    def describe(self) -> JSONObject:
        """The model and the runtime, as the init log reports them."""
        import platform

        import onnxruntime
        import tokenizers

        from .. import __version__

        return {
            "model": self.model_id,
            "revision": self.revision,
            "embedding_dimension": self.dimension,
            "text_max_token_length": self.max_tokens,
            "fingerprint": self.fingerprint,
            "device": "cpu",
            "runtime": {
                "siglip_text": __version__,
                "onnxruntime": onnxruntime.__version__,
                "tokenizers": tokenizers.__version__,
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
        }

    def probe(self) -> np.ndarray:
        """A real inference through every stage, with the highest token id of the vocabulary.

        Catches a graph whose embedding table is smaller than the tokenizer's vocabulary, a
        graph that returns NaN or zeros, and output shape mismatches, before any request.
        Returns the vector of `PROBE_TEXT` (the init's self-check compares it with the
        manifest's reference); records the pace it measured (`probe_seconds_per_input`).
        """
        began = time.perf_counter()
        try:
            text = self.embed_texts([PROBE_TEXT])
        except SiglipError as exc:
            raise ModelLoadError(f"inference probe failed: {exc.message}") from exc
        first = time.perf_counter() - began
        highest = self.tokenizer.vocab_size - 1
        began = time.perf_counter()
        try:
            ids = self.embed_token_ids([[highest, self.tokenizer.eos_id]])
        except SiglipError as exc:
            raise ModelLoadError(
                f"inference probe failed: the graph cannot embed token id {highest}, the last "
                f"of the tokenizer's {self.tokenizer.vocab_size} entries: its token embedding "
                "table is smaller than the tokenizer (they do not belong together) "
                f"({exc.message})"
            ) from exc
        # The first run also pays for first touches (pages, allocations): the faster is the pace.
        self.probe_seconds_per_input = min(first, time.perf_counter() - began)
        for vectors in (text.vectors, ids.vectors):
            norm = float(np.linalg.norm(vectors[0]))
            if abs(norm - 1.0) > 1e-3:
                raise ModelLoadError(f"inference probe failed: vector norm {norm}, expected 1")
        vector: np.ndarray = text.vectors[0]
        return vector
