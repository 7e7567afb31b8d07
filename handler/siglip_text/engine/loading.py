"""The init phase: validate every artifact, build the service, run a real inference probe.

`build_service(manifest, paths, session)` works from a manifest already in memory (export
checks the bundle it is writing this way, before any manifest file exists);
`load_service(settings)` reads the manifest and the settings first; `start_loading(settings)`
does the same but returns at once, with the ONNX Runtime session building in a thread (see
`ServiceLoad`). Each raises ModelLoadError naming the cause, so a bad bundle never serves a
request.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from .bundle import BundlePaths, Manifest, check_file, load_manifest
from .config import Settings, processes_per_environment
from .encoder import OnnxEncoder, SessionConfig
from .fingerprint import check_contract
from .self_check import check_int8_kernel, check_reference
from .service import PROBE_TEXT, EmbeddingService, InitTimings
from .sizing import check_function_memory
from .tokenization import SiglipTokenizer


def graph_optimization_level(setting: str, manifest: Manifest) -> str:
    """``auto``: a graph that export optimized offline loads without optimizing again."""
    if setting != "auto":
        return setting
    return "disable" if manifest.optimized_offline else "all"


def session_config(settings: Settings, manifest: Manifest) -> SessionConfig:
    """The ONNX Runtime session the settings ask for, for this bundle."""
    return SessionConfig(
        intra_op_threads=settings.intra_op_threads(),
        allow_spinning=settings.ort_allow_spinning,
        max_batch_size=settings.max_text_batch_size,
        graph_optimization=graph_optimization_level(settings.ort_graph_optimization, manifest),
    )


def load_service(settings: Settings) -> EmbeddingService:
    """The init phase as serve runs it: `start_loading`, then its result at once."""
    return start_loading(settings).result()


def start_loading(settings: Settings) -> ServiceLoad:
    """Read the manifest named by the settings and start building the service (see
    `ServiceLoad`); the Lambda entry point calls this before it imports the web stack."""
    started = time.perf_counter()
    paths = settings.artifact_paths()
    manifest = load_manifest(paths.manifest)
    # In Lambda: fail before loading a model the function's memory cannot hold (sizing.py).
    memory_warning = check_function_memory(manifest, processes=processes_per_environment() or 1)
    load = ServiceLoad(
        manifest,
        paths,
        session_config(settings, manifest),
        output_name=settings.onnx_output_name,
        cache_size=settings.cache_size,
        cache_max_bytes=settings.cache_max_bytes,
        started=started,
    )
    load.memory_warning = memory_warning
    return load


def build_service(
    manifest: Manifest,
    paths: BundlePaths,
    session: SessionConfig,
    *,
    output_name: str = "text_embeds",
    cache_size: int = 0,
    self_check: bool = True,
) -> EmbeddingService:
    """Files, tokenizer and session (overlapped), then the probe and, unless told not to
    (a measuring tool: tools/emulation.py), the self-check of this CPU."""
    return ServiceLoad(
        manifest,
        paths,
        session,
        output_name=output_name,
        cache_size=cache_size,
        self_check=self_check,
    ).result()


class ServiceLoad:
    """One init in progress: the files are checked and the ONNX Runtime session is building
    in a worker thread from the moment this exists; `result()` parses the tokenizer in the
    calling thread, waits for the session, and runs the probe.

    ONNX Runtime releases the GIL while it builds a session, so whatever the caller does in
    between (the Lambda entry point imports FastAPI, Mangum and Powertools, about 0.3 s of
    Python) overlaps with it. The tokenizer parse holds the GIL (``tokenizers`` does not
    release it), so it runs after those imports, still beside the session build.
    """

    def __init__(
        self,
        manifest: Manifest,
        paths: BundlePaths,
        session: SessionConfig,
        *,
        output_name: str = "text_embeds",
        cache_size: int = 0,
        cache_max_bytes: int = 64 * 1024 * 1024,
        started: float | None = None,
        self_check: bool = True,
    ) -> None:
        self.manifest = manifest
        self.self_check = self_check
        self.paths = paths
        self.cache_size = cache_size
        self.cache_max_bytes = cache_max_bytes
        #: sizing.check_function_memory's warning, for the Lambda entry point to log.
        self.memory_warning: str | None = None
        self.timings = InitTimings()
        began = time.perf_counter() if started is None else started
        check_file(paths.onnx, "ONNX model", manifest)
        check_file(paths.tokenizer, "tokenizer", manifest)
        for name in manifest.recorded_files():
            # e.g. text_model.onnx.data: a truncated weights file is named here, not deep in ORT
            if name not in (paths.onnx.name, paths.tokenizer.name, paths.manifest.name):
                check_file(paths.onnx.parent / name, "model file", manifest)
        self.timings.manifest_s = time.perf_counter() - began

        def build_encoder() -> OnnxEncoder:
            began = time.perf_counter()
            try:
                return OnnxEncoder(
                    paths.onnx,
                    output_name=output_name,
                    dimension=manifest.embedding_dimension,
                    max_length=manifest.text_max_token_length,
                    config=session,
                )
            finally:
                self.timings.session_s = time.perf_counter() - began

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="siglip-init")
        self._encoder = pool.submit(build_encoder)
        pool.shutdown(wait=False)  # the thread ends with its one task

    def result(self) -> EmbeddingService:
        """The service, probed and self-checked on this CPU (self_check.py); raises
        ModelLoadError (the session's error first: the graph is checked before the
        tokenizer)."""
        timings = self.timings
        try:
            began = time.perf_counter()
            pruned = self.manifest.tokenizer_merges
            tokenizer = SiglipTokenizer.from_file(
                self.paths.tokenizer,
                max_length=self.manifest.text_max_token_length,
                token_ids=pruned.token_ids if pruned is not None else None,
            )
            timings.tokenizer_s = time.perf_counter() - began
        finally:
            waited = time.perf_counter()
            encoder = self._encoder.result()
            timings.session_wait_s = time.perf_counter() - waited
        service = EmbeddingService(
            self.manifest,
            tokenizer,
            encoder,
            cache_size=self.cache_size,
            cache_max_bytes=self.cache_max_bytes,
            init_timings=timings,
        )
        began = time.perf_counter()
        if self.self_check:
            check_int8_kernel(self.manifest)
        vector = service.probe()
        if self.self_check:
            check_reference(self.manifest, PROBE_TEXT, vector)
        timings.probe_s = time.perf_counter() - began
        service.fingerprint = check_contract(self.manifest, self.paths, tokenizer)
        return service
