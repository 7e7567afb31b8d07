"""The init phase: validate every artifact, build the service, run a real inference probe.

One `ServiceInit` is one init and the one place that holds its outcome. `ServiceInit.start`
builds the service from the settings: it reads the manifest, checks the function's memory
and the bundle's files, starts the ONNX Runtime session building in a worker thread, and
returns at once; `service()` finishes the init and returns the service or raises what
stopped it (ModelLoadError naming the cause, ConfigError for the settings), so a bad bundle
never serves a request. `load_service(settings)` is both in one call (serve, the tools);
`ServiceInit.start_bundle` starts from a manifest already in memory (export checks the
bundle it is writing this way, before any manifest file exists).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

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
    """The init as serve and the tools run it: `ServiceInit.start`, then its service."""
    return ServiceInit.start(settings).service()


class ServiceInit:
    """One init: started by `start` (or `start_bundle`), finished by `service()`, which
    returns the service or raises what stopped the init, the same on every call.

    Nothing is raised before `service()`: the Lambda entry point starts the init before it
    imports the web stack and raises its error once its logger exists. ONNX Runtime
    releases the GIL while it builds a session, so whatever the caller does in between (the
    entry point imports FastAPI, Mangum and Powertools) overlaps with it. The tokenizer parse
    holds the GIL (``tokenizers`` does not release it), so `service()` runs it after those
    imports, still beside the session build.
    """

    def __init__(self) -> None:
        """An init not started; `start` and `start_bundle` make started ones."""
        #: The bundle's manifest, once read (None when the init stopped before).
        self.manifest: Manifest | None = None
        #: sizing.check_function_memory's warning, for the Lambda entry point to log.
        self.memory_warning: str | None = None
        self.timings = InitTimings()
        self._error: Exception | None = None
        self._service: EmbeddingService | None = None
        self._finish: Callable[[], EmbeddingService] | None = None

    @classmethod
    def start(cls, settings: Settings | Callable[[], Settings]) -> ServiceInit:
        """The service from the settings, or from the function that reads them (the Lambda
        entry point passes `config.get_settings`, so that invalid settings are held like any
        other init error). In Lambda the function's memory is checked before the model is
        loaded (sizing.py)."""
        init = cls()
        try:
            if not isinstance(settings, Settings):
                settings = settings()
            began = time.perf_counter()
            paths = settings.artifact_paths()
            manifest = load_manifest(paths.manifest)
            init.manifest = manifest
            init.memory_warning = check_function_memory(
                manifest, processes=processes_per_environment() or 1
            )
            init._begin(
                manifest,
                paths,
                session_config(settings, manifest),
                output_name=settings.onnx_output_name,
                cache_size=settings.cache_size,
                cache_max_bytes=settings.cache_max_bytes,
                self_check=True,
                began=began,
            )
        except Exception as exc:
            init._error = exc
        return init

    @classmethod
    def start_bundle(
        cls,
        manifest: Manifest,
        paths: BundlePaths,
        session: SessionConfig,
        *,
        self_check: bool = True,
    ) -> ServiceInit:
        """The service from a manifest in memory, without a cache; the self-check of this
        CPU unless told not to (a measuring tool: tools/emulation.py)."""
        init = cls()
        init.manifest = manifest
        try:
            init._begin(
                manifest,
                paths,
                session,
                output_name=Settings.model_fields["onnx_output_name"].default,
                cache_size=0,
                cache_max_bytes=0,
                self_check=self_check,
                began=time.perf_counter(),
            )
        except Exception as exc:
            init._error = exc
        return init

    @property
    def error(self) -> Exception | None:
        """What stopped the init so far, without waiting for the session: the settings, the
        manifest, the memory check or a file (None while it goes on or once it served)."""
        return self._error

    def service(self) -> EmbeddingService:
        """The service, probed and self-checked on this CPU (self_check.py); or the error that
        stopped the init (the session's first: the graph is checked before the tokenizer)."""
        if self._finish is not None:
            finish, self._finish = self._finish, None
            try:
                self._service = finish()
            except Exception as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        if self._service is None:
            raise RuntimeError("ServiceInit.service() on an init that was never started")
        return self._service

    def _begin(
        self,
        manifest: Manifest,
        paths: BundlePaths,
        session: SessionConfig,
        *,
        output_name: str,
        cache_size: int,
        cache_max_bytes: int,
        self_check: bool,
        began: float,
    ) -> None:
        """The files checked, the session building in a worker thread; `_finish` set to what
        `service()` runs."""
        timings = self.timings
        check_file(paths.onnx, "ONNX model", manifest)
        check_file(paths.tokenizer, "tokenizer", manifest)
        for name in manifest.recorded_files():
            # e.g. text_model.onnx.data: a truncated weights file is named here, not deep in ORT
            if name not in (paths.onnx.name, paths.tokenizer.name, paths.manifest.name):
                check_file(paths.onnx.parent / name, "model file", manifest)
        timings.manifest_s = time.perf_counter() - began

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
                timings.session_s = time.perf_counter() - began

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="siglip-init")
        encoder: Future[OnnxEncoder] = pool.submit(build_encoder)
        pool.shutdown(wait=False)  # the thread ends with its one task

        def finish() -> EmbeddingService:
            try:
                began = time.perf_counter()
                pruned = manifest.tokenizer_merges
                tokenizer = SiglipTokenizer.from_file(
                    paths.tokenizer,
                    max_length=manifest.text_max_token_length,
                    token_ids=pruned.token_ids if pruned is not None else None,
                )
                timings.tokenizer_s = time.perf_counter() - began
            finally:
                waited = time.perf_counter()
                built = encoder.result()
                timings.session_wait_s = time.perf_counter() - waited
            service = EmbeddingService(
                manifest,
                tokenizer,
                built,
                cache_size=cache_size,
                cache_max_bytes=cache_max_bytes,
                init_timings=timings,
            )
            began = time.perf_counter()
            if self_check:
                check_int8_kernel(manifest)
            vector = service.probe()
            if self_check:
                check_reference(manifest, PROBE_TEXT, vector)
            timings.probe_s = time.perf_counter() - began
            service.fingerprint = check_contract(manifest, paths, tokenizer)
            return service

        self._finish = finish
