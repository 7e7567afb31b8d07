"""The init phase: validate every artifact, build the service, run a real inference probe.

One `ServiceInit` is one init and the one place that holds its outcome. Its stages, in order:

1. **plan** (`InitPlan.from_settings`): the settings, the manifest, the function's memory;
2. **files** (`check_files`): every file the manifest records, present and whole;
3. **session** (`start_session`): the ONNX Runtime session starts building in a worker
   thread; its `Future` is the one piece of work that overlaps with what the caller does
   next (the Lambda entry point imports the web stack meanwhile);
4. **tokenizer** (`load_tokenizer`), then **wait** for the session (`wait_for_session`);
5. **service** (`EmbeddingService`), then **this CPU's arithmetic** (`check_arithmetic`:
   the int8 kernel's known answer, the probe, the probe against the manifest's reference);
6. **contract** (`fingerprint.check_contract`): what the bundle serves against what its
   manifest records.

`ServiceInit.start` runs stages 1 to 3 and returns at once; `service()` runs the rest and
returns the service or raises what stopped the init (ModelLoadError naming the cause,
ConfigError for the settings), so a bad bundle never serves a request. `load_service` is
both in one call (the tools); `ServiceInit.start_bundle` starts from a manifest already in
memory (export checks the bundle it is writing this way). SnapStart's after-restore checks
run `build_encoder` and `check_arithmetic` again, on the restoring host.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import numpy as np

from .bundle import BundlePaths, Manifest, check_file, load_manifest
from .config import Settings, processes_per_environment
from .encoder import OnnxEncoder, SessionConfig
from .fingerprint import check_contract
from .self_check import check_int8_kernel, check_reference
from .service import PROBE_TEXT, EmbeddingService, InitTimings
from .sizing import check_function_memory
from .tokenization import SiglipTokenizer

_P = ParamSpec("_P")
_T = TypeVar("_T")


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


@dataclass(frozen=True)
class InitPlan:
    """What one init builds: the bundle, its session, the service's cache, and whether this
    CPU's arithmetic is checked (a measuring tool turns it off: tools/emulation.py)."""

    manifest: Manifest
    paths: BundlePaths
    session: SessionConfig
    output_name: str = Settings.model_fields["onnx_output_name"].default
    cache_size: int = 0
    cache_max_bytes: int = 0
    self_check: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> InitPlan:
        """The plan the settings ask for; the manifest read (ModelLoadError if it is bad)."""
        paths = settings.artifact_paths()
        manifest = load_manifest(paths.manifest)
        return cls(
            manifest,
            paths,
            session_config(settings, manifest),
            output_name=settings.onnx_output_name,
            cache_size=settings.cache_size,
            cache_max_bytes=settings.cache_max_bytes,
        )

    def with_session(self, session: SessionConfig) -> InitPlan:
        """The same plan for another session (SnapStart: a host with another allowance)."""
        return dataclasses.replace(self, session=session)


def load_service(settings: Settings) -> EmbeddingService:
    """The init as serve and the tools run it: `ServiceInit.start`, then its service."""
    return ServiceInit.start(settings).service()


def check_files(plan: InitPlan) -> None:
    """Every file of the bundle present, readable and of its recorded size (stage 2)."""
    paths, manifest = plan.paths, plan.manifest
    check_file(paths.onnx, "ONNX model", manifest)
    check_file(paths.tokenizer, "tokenizer", manifest)
    for name in manifest.recorded_files():
        # e.g. text_model.onnx.data: a truncated weights file is named here, not deep in ORT
        if name not in (paths.onnx.name, paths.tokenizer.name, paths.manifest.name):
            check_file(paths.onnx.parent / name, "model file", manifest)


def build_encoder(plan: InitPlan) -> OnnxEncoder:
    """The ONNX Runtime session, its graph checked against the manifest."""
    return OnnxEncoder(
        plan.paths.onnx,
        output_name=plan.output_name,
        dimension=plan.manifest.embedding_dimension,
        max_length=plan.manifest.text_max_token_length,
        config=plan.session,
    )


def start_session(plan: InitPlan, timings: InitTimings) -> Future[OnnxEncoder]:
    """`build_encoder` in a worker thread (stage 3). ONNX Runtime releases the GIL while it
    builds a session, so whatever the caller does until `wait_for_session` overlaps with it."""

    def timed() -> OnnxEncoder:
        began = time.perf_counter()
        try:
            return build_encoder(plan)
        finally:
            timings.session_s = time.perf_counter() - began

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="siglip-init")
    session = pool.submit(timed)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return session


def load_tokenizer(plan: InitPlan) -> SiglipTokenizer:
    """The bundle's tokenizer (stage 4). Its parse holds the GIL (``tokenizers`` does not
    release it), so it runs after the caller's overlapping work, still beside the session."""
    pruned = plan.manifest.tokenizer_merges
    return SiglipTokenizer.from_file(
        plan.paths.tokenizer,
        max_length=plan.manifest.text_max_token_length,
        token_ids=pruned.token_ids if pruned is not None else None,
    )


def check_arithmetic(service: EmbeddingService, *, self_check: bool = True) -> np.ndarray:
    """This CPU's arithmetic (stage 5; again after each SnapStart restore): the int8
    kernel's known answer, a real probe, the probe's vector against the manifest's reference
    (self_check.py). The probe runs either way; returns its vector."""
    if self_check:
        check_int8_kernel(service.manifest)
    vector = service.probe()
    if self_check:
        check_reference(service.manifest, PROBE_TEXT, vector)
    return vector


class ServiceInit:
    """One init: started by `start` (or `start_bundle`), finished by `service()`, which
    returns the service or raises what stopped the init, the same on every call.

    Nothing is raised before `service()`: the Lambda entry point starts the init before it
    imports the web stack and raises its error once its logger exists.
    """

    def __init__(self, plan: InitPlan | None = None, *, began: float | None = None) -> None:
        """An init of `plan` whose session is not started; `start` and `start_bundle` make
        started ones."""
        self.plan = plan
        #: The settings the init was started from (None when it started from a manifest, or
        #: when reading them failed).
        self.settings: Settings | None = None
        #: sizing.check_function_memory's warning, for the Lambda entry point to log.
        self.memory_warning: str | None = None
        self.timings = InitTimings()
        self._began = time.perf_counter() if began is None else began
        self._session: Future[OnnxEncoder] | None = None
        self._error: Exception | None = None
        self._service: EmbeddingService | None = None

    @classmethod
    def start(cls, settings: Settings | Callable[[], Settings]) -> ServiceInit:
        """Stages 1 to 3 from the settings, or from the function that reads them (the Lambda
        entry point passes `config.get_settings`, so that invalid settings are held like any
        other init error). In Lambda the function's memory is checked before the model is
        loaded (sizing.py)."""
        began = time.perf_counter()
        try:
            if not isinstance(settings, Settings):
                settings = settings()
            plan = InitPlan.from_settings(settings)
            memory_warning = check_function_memory(
                plan.manifest, processes=processes_per_environment() or 1
            )
        except Exception as exc:
            failed = cls()
            failed._error = exc
            return failed
        init = cls(plan, began=began)
        init.settings = settings
        init.memory_warning = memory_warning
        return init._started()

    @classmethod
    def start_bundle(
        cls,
        manifest: Manifest,
        paths: BundlePaths,
        session: SessionConfig,
        *,
        self_check: bool = True,
    ) -> ServiceInit:
        """Stages 2 and 3 from a manifest in memory, without a cache; the self-check of this
        CPU unless told not to (a measuring tool: tools/emulation.py)."""
        return cls(InitPlan(manifest, paths, session, self_check=self_check))._started()

    @property
    def manifest(self) -> Manifest | None:
        """The bundle's manifest, once read (None when the init stopped before)."""
        return self.plan.manifest if self.plan is not None else None

    @property
    def error(self) -> Exception | None:
        """What stopped the init so far, without waiting for the session: the settings, the
        manifest, the memory check or a file (None while it goes on or once it served)."""
        return self._error

    def service(self) -> EmbeddingService:
        """The service, probed and self-checked on this CPU (self_check.py); or the error that
        stopped the init."""
        if self._service is None and self._error is None:
            try:
                if self.plan is None or self._session is None:
                    raise RuntimeError("ServiceInit.service() on an init never started")
                self._service = self.finish(self.plan, self._session)
            except Exception as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        assert self._service is not None
        return self._service

    def finish(self, plan: InitPlan, session: Future[OnnxEncoder]) -> EmbeddingService:
        """Stages 4 to 6, in order, with the session that `start_session` is building."""
        try:
            tokenizer = self._timed("tokenizer_s", load_tokenizer, plan)
        finally:
            # The session's error wins over the tokenizer's: the graph is checked first.
            encoder = self._timed("session_wait_s", Future.result, session)
        service = EmbeddingService(
            plan.manifest,
            tokenizer,
            encoder,
            cache_size=plan.cache_size,
            cache_max_bytes=plan.cache_max_bytes,
            init_timings=self.timings,
        )
        self._timed("probe_s", check_arithmetic, service, self_check=plan.self_check)
        service.fingerprint = check_contract(plan.manifest, plan.paths, tokenizer)
        return service

    def _started(self) -> ServiceInit:
        """Stages 2 and 3: the files checked, the session building (or the error held)."""
        assert self.plan is not None
        try:
            check_files(self.plan)
            self.timings.manifest_s = time.perf_counter() - self._began
            self._session = start_session(self.plan, self.timings)
        except Exception as exc:
            self._error = exc
        return self

    def _timed(self, name: str, stage: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """One stage, its seconds recorded in `timings` under ``name``."""
        began = time.perf_counter()
        try:
            return stage(*args, **kwargs)
        finally:
            setattr(self.timings, name, time.perf_counter() - began)
