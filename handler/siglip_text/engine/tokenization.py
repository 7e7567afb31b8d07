"""Fixed-length SigLIP 2 tokenization: text or token-id inputs -> an ``[n, L]`` id matrix.

The contract's rules, applied here whatever ``tokenizer.json`` stores (docs/contract.md,
section 1): its normalizer, no BOS, sticky EOS, right-padded to exactly ``L``; special-token
strings typed in a text are text; the empty string is ``<eos>`` then pads; token-id inputs
are taken as given. Each row records whether its input was cut (`TokenBatch.truncated`), and
`tokens` gives what the model is fed as token objects (``POST /tokenize``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tokenizers import Encoding, Tokenizer

from .errors import FOREIGN_TOKEN_IDS_HINT, InvalidInputError, ModelLoadError

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"

#: Texts up to this many UTF-8 bytes per token slot are tokenized whole; longer ones through
#: a prefix window of that many bytes that doubles until the kept tokens settle (see
#: `_content`). Bytes, not characters, bound the work: with byte fallback a character
#: becomes up to 4 tokens (an emoji, a rare CJK character), so a window in characters
#: would let 4 x that many tokens through. Prose, CJK and emoji run 3 to 5 bytes per token,
#: so most texts that fill 64 tokens settle between the first window and its double.
WINDOW_BYTES_PER_TOKEN = 8
#: The most UTF-8 bytes of text one tokenizer call takes: a request's texts are tokenized
#: in slices of this size, and only each text's kept ids (and offsets) outlive a slice, so
#: the tokenizer's own objects (about 100 bytes per token, and 17 per byte for the
#: normalizer's alignments) stay a few MiB whatever the request.
SLICE_BYTES = 64 * 1024
#: The longest text `SiglipTokenizer.count_tokens` counts whole (tokenizing it takes a few
#: milliseconds; a 6 MB text, seconds).
COUNT_CHARS = 65_536


@dataclass(frozen=True)
class TokenBatch:
    """Token ids ready for the encoder, and how many of them are real (not padding)."""

    ids: np.ndarray  # int64 [n, L]
    lengths: list[int]  # tokens fed per row, EOS included, pads excluded
    truncated: list[bool] = field(default_factory=list)  # per row: the input was cut

    @property
    def total_tokens(self) -> int:
        return sum(self.lengths)


@dataclass(frozen=True, slots=True)
class Token:
    """One token the model is fed, as text-embeddings-inference's ``/tokenize`` shows it:
    ``text`` is the input's characters ``start:stop`` (the original text, before
    lowercasing); a special token (``<eos>``) has its own string and no offsets."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


class SiglipTokenizer:
    """Wraps a `tokenizers.Tokenizer` and applies the fixed-length SigLIP 2 rule."""

    def __init__(
        self, tokenizer: Tokenizer, *, max_length: int, token_ids: int | None = None
    ) -> None:
        if max_length < 2:
            raise ModelLoadError(f"text_max_token_length must be at least 2, got {max_length}")
        pad_id = tokenizer.token_to_id(PAD_TOKEN)
        eos_id = tokenizer.token_to_id(EOS_TOKEN)
        missing = [tok for tok, tid in ((PAD_TOKEN, pad_id), (EOS_TOKEN, eos_id)) if tid is None]
        if missing:
            raise ModelLoadError(
                f"tokenizer: special token(s) {', '.join(missing)} missing from the vocabulary; "
                "a SigLIP 2 tokenizer needs <pad> and <eos>"
            )
        assert pad_id is not None and eos_id is not None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        # Special-token strings in user text are text (see the module docstring).
        tokenizer.encode_special_tokens = True
        self._tokenizer = tokenizer
        self.max_length = max_length
        self.pad_id = pad_id
        self.eos_id = eos_id
        self.bos_id = tokenizer.token_to_id("<bos>")  # None when the vocabulary has none
        entries = tokenizer.get_vocab_size(with_added_tokens=True)
        if token_ids is not None and token_ids < entries:
            raise ModelLoadError(
                f"tokenizer: the manifest gives {token_ids} token ids but the tokenizer has "
                f"{entries} entries; the manifest does not belong to this tokenizer.json"
            )
        # The id range: the file's own count, unless export removed entries no text can
        # produce (the manifest's tokenizer_merges.token_ids), which token-id inputs may use.
        self.vocab_size = entries if token_ids is None else token_ids
        self._window = max_length * WINDOW_BYTES_PER_TOKEN

    @classmethod
    def from_file(
        cls, path: Path, *, max_length: int, token_ids: int | None = None
    ) -> SiglipTokenizer:
        """Load ``tokenizer.json``; any failure is a ModelLoadError naming the file."""
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception on bad JSON
            first_line = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ModelLoadError(f"tokenizer {path}: cannot be loaded ({first_line})") from None
        return cls(tokenizer, max_length=max_length, token_ids=token_ids)

    def encode_texts(self, texts: Sequence[str]) -> TokenBatch:
        """Tokenize texts: normalize, drop nothing, truncate to L-1, append EOS, pad to L."""
        rows: list[list[int]] = []
        cut: list[bool] = []
        for content in self._content(texts):
            rows.append(content.ids + [self.eos_id])
            cut.append(content.cut)
        return self._pack(rows, cut)

    def tokens(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[list[Token]]:
        """What the model is fed for each text, as token objects: the first L-1 content
        tokens, then ``<eos>`` unless ``add_special_tokens`` is False (the pads after it
        are not listed)."""
        result: list[list[Token]] = []
        for text, content in zip(texts, self._content(texts, offsets=True), strict=True):
            row = [
                Token(id=i, text=text[start:stop], special=False, start=start, stop=stop)
                for i, (start, stop) in zip(content.ids, content.offsets, strict=True)
            ]
            if add_special_tokens:
                row.append(
                    Token(id=self.eos_id, text=EOS_TOKEN, special=True, start=None, stop=None)
                )
            result.append(row)
        return result

    def count_tokens(self, text: str) -> tuple[int, bool]:
        """The tokens ``text`` has before any cut, ``<eos>`` included, and whether that is
        the exact count: a text over `COUNT_CHARS` characters is counted in that prefix
        only (a lower bound), so that a refusal costs no more than a request."""
        exact = len(text) <= COUNT_CHARS
        (encoding,) = self._encode_many([text if exact else text[:COUNT_CHARS]], first_index=[0])
        return len(encoding) + 1, exact  # len: no list of every id

    def content_ids(self, text: str) -> list[int]:
        """The content ids the model is fed for ``text`` (the first L-1, no ``<eos>``)."""
        return self._content([text])[0].ids

    def token_id(self, token: str) -> int | None:
        """The id of ``token`` in the vocabulary, or None."""
        found = self._tokenizer.token_to_id(token)
        return None if found is None else int(found)

    def normalize(self, text: str) -> str:
        """``text`` as the tokenizer's normalizer leaves it (the lowercasing is there)."""
        normalizer = self._tokenizer.normalizer
        return text if normalizer is None else str(normalizer.normalize_str(text))

    @property
    def bpe_dropout(self) -> float | None:
        """The BPE model's dropout, if it has one: set, it makes the ids random."""
        value = getattr(self._tokenizer.model, "dropout", None)
        return float(value) if isinstance(value, int | float) else None

    def _content(self, texts: Sequence[str], *, offsets: bool = False) -> list[_Content]:
        """Each text's kept content tokens (the first L-1, no special tokens), at the cost of
        a prefix, not of the whole text, and of a slice of the request at a time.

        A text longer than the window is tokenized through a prefix of that many UTF-8
        bytes; its kept ids are taken once doubling the prefix no longer changes them: BPE
        merges are local, so text far past the cut cannot alter them. A prefix that ends
        with more tokens than are kept, and agrees with its double, proves the text longer
        than the cut (`_Content.cut`), so a 1 MB string costs about as much as a 1 KB one.
        All texts of a request advance together, window by window, in slices of
        `SLICE_BYTES`: only the kept ids outlive a slice.
        """
        for i, text in enumerate(texts):
            # Invalid Unicode is refused wherever it stands, past the window too; the check
            # runs at memory speed, unlike tokenization.
            _require_valid_unicode(text, i)
        done: list[_Content | None] = [None] * len(texts)
        held: dict[int, _Content] = {}  # a text's prefix at the last size, when it was full
        pending = list(range(len(texts)))
        size = self._window
        while pending:
            unsettled: list[int] = []
            step = max(1, SLICE_BYTES // size)
            for first in range(0, len(pending), step):
                indices = pending[first : first + step]
                pieces = [_prefix(texts[i], size) for i in indices]
                found = self._kept(pieces, indices, offsets=offsets)
                for i, piece, content in zip(indices, pieces, found, strict=True):
                    before = held.pop(i, None)
                    if len(piece) == len(texts[i]):
                        done[i] = content
                    elif before is not None and before.ids == content.ids:
                        done[i] = before
                    else:
                        if content.cut:
                            held[i] = content
                        unsettled.append(i)
            pending = unsettled
            size *= 2
        kept: list[_Content] = []
        for item in done:
            assert item is not None  # every text settles: its whole text at the latest
            kept.append(item)
        return kept

    def _kept(self, pieces: list[str], indices: list[int], *, offsets: bool) -> list[_Content]:
        """The kept tokens of each piece, the tokenizer's objects dropped at once."""
        limit = self.max_length - 1
        return [
            _Content(
                ids=encoding.ids[:limit],
                offsets=encoding.offsets[:limit] if offsets else [],
                cut=len(encoding) > limit,
            )
            for encoding in self._encode_many(pieces, first_index=indices)
        ]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens spelled out (for messages about mismatches)."""
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))

    def encode_token_ids(self, sequences: Sequence[Sequence[int]]) -> TokenBatch:
        """Take token ids as given (no EOS added), truncate to L, pad with <pad>. Every id
        is range-checked, past the cut too: an id outside the vocabulary means ids of
        another tokenizer, wherever it stands."""
        rows: list[list[int]] = []
        cut = [len(seq) > self.max_length for seq in sequences]
        for i, seq in enumerate(sequences):
            if seq and (min(seq) < 0 or max(seq) >= self.vocab_size):
                value = next(v for v in seq if not 0 <= v < self.vocab_size)
                raise InvalidInputError(
                    f"input[{i}] has token id {_short(value)} outside the vocabulary "
                    f"[0, {self.vocab_size}): {FOREIGN_TOKEN_IDS_HINT}",
                    param="input",
                )
            rows.append(list(seq[: self.max_length]))
        return self._pack(rows, cut)

    def _pack(self, rows: list[list[int]], cut: list[bool]) -> TokenBatch:
        matrix = np.full((len(rows), self.max_length), self.pad_id, dtype=np.int64)
        for r, ids in enumerate(rows):
            matrix[r, : len(ids)] = ids
        return TokenBatch(ids=matrix, lengths=[len(ids) for ids in rows], truncated=cut)

    def _encode_many(self, texts: list[str], *, first_index: list[int]) -> list[Encoding]:
        try:
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        except TypeError:
            # The Rust side takes only valid Unicode; find the offender for the message.
            for text, index in zip(texts, first_index, strict=True):
                _require_valid_unicode(text, index)
            raise
        return list(encodings)


class _Content(NamedTuple):
    """A text's kept content tokens: the first L-1 ids, their character offsets (when
    asked for), and whether the text has more tokens than that (it was cut)."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    cut: bool


def _prefix(text: str, size: int) -> str:
    """The longest prefix of ``text`` of at most ``size`` UTF-8 bytes (whole characters)."""
    if len(text) * 4 <= size:
        return text  # a character is at most 4 bytes
    piece = text[:size]  # at least ``size`` bytes, unless it is the whole text
    raw = piece.encode("utf-8")
    if len(raw) <= size:
        return piece
    # The cut may fall inside a character: its leading bytes are dropped.
    return raw[:size].decode("utf-8", "ignore")


def _require_valid_unicode(text: str, index: int) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"input[{index}] is not valid Unicode (lone surrogate at character {exc.start})",
            param="input",
        ) from None


def _short(value: object, limit: int = 24) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
