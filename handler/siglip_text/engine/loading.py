"""The init phase: validate every artifact, build the service, run a real inference probe.

One `ServiceInit` is one init of one `InitPlan` (plain values: the settings module and the
assembly make it) and the one place that holds its outcome; its stages are named functions,
in order. docs/architecture.md, "The init's stages", walks them.
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
from .encoder import OnnxEncoder, SessionConfig
from .fingerprint import check_contract
from .self_check import check_int8_kernel, check_reference
from .service import PROBE_TEXT, EmbeddingService, InitTimings
from .tokenization import SiglipTokenizer

_P = ParamSpec("_P")
_T = TypeVar("_T")


def graph_optimization_level(setting: str, manifest: Manifest) -> str:
    """``auto``: a graph that export optimized offline loads without optimizing again."""
    if setting != "auto":
        return setting
    return "disable" if manifest.optimized_offline else "all"


@dataclass(frozen=True)
class InitPlan:
    """What one init builds: the bundle, its session, the service's cache, and whether this
    CPU's arithmetic is checked (a measuring tool turns it off: tools/emulation.py)."""

    manifest: Manifest
    paths: BundlePaths
    session: SessionConfig
    output_name: str = "text_embeds"
    cache_size: int = 0
    cache_max_bytes: int = 0
    self_check: bool = True

    @classmethod
    def read(
        cls,
        paths: BundlePaths,
        session: SessionConfig,
        *,
        output_name: str,
        cache_size: int,
        cache_max_bytes: int,
    ) -> InitPlan:
        """The plan for the bundle at ``paths``: its manifest read (ModelLoadError if it is
        bad)."""
        manifest = load_manifest(paths.manifest)
        return cls(
            manifest,
            paths,
            session,
            output_name=output_name,
            cache_size=cache_size,
            cache_max_bytes=cache_max_bytes,
        )

    def with_session(self, session: SessionConfig) -> InitPlan:
        """The same plan for another session (SnapStart: a host with another allowance)."""
        return dataclasses.replace(self, session=session)


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
    level = graph_optimization_level(plan.session.graph_optimization, plan.manifest)
    return OnnxEncoder(
        plan.paths.onnx,
        output_name=plan.output_name,
        dimension=plan.manifest.embedding_dimension,
        max_length=plan.manifest.text_max_token_length,
        config=dataclasses.replace(plan.session, graph_optimization=level),
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

    Nothing is raised before `service()`: the Lambda function's assembly starts the init
    before it imports the web stack and raises its error once its logger exists.
    """

    def __init__(self, plan: InitPlan | None = None, *, began: float | None = None) -> None:
        """An init of `plan` whose session is not started; `start` and `start_bundle` make
        started ones."""
        self.plan = plan
        self.timings = InitTimings()
        self._began = time.perf_counter() if began is None else began
        self._session: Future[OnnxEncoder] | None = None
        self._error: Exception | None = None
        self._service: EmbeddingService | None = None

    @classmethod
    def start(cls, plan: InitPlan, *, began: float | None = None) -> ServiceInit:
        """Stages 2 and 3 of a plan (stage 1, the plan, is the caller's: it read the
        manifest, which ``began`` may time from)."""
        return cls(plan, began=began)._started()

    @classmethod
    def failed(cls, error: Exception) -> ServiceInit:
        """An init that stopped before its plan was made: `service()` raises ``error``."""
        init = cls()
        init._error = error
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
        """Stages 2 and 3 from a manifest in memory, without a cache; the self-check of this
        CPU unless told not to (a measuring tool: tools/emulation.py)."""
        return cls(InitPlan(manifest, paths, session, self_check=self_check))._started()

    @property
    def manifest(self) -> Manifest | None:
        """The bundle's manifest, once read (None when the init stopped before)."""
        return self.plan.manifest if self.plan is not None else None

    @property
    def error(self) -> Exception | None:
        """What stopped the init so far, without waiting for the session: its plan or a file
        (None while it goes on or once it served)."""
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
