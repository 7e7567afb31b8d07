"""Lambda SnapStart's hooks, which make one snapshot safe to restore on any host: before the
snapshot the request path is warmed and no key is held; after a restore the keys are read
again, this host's arithmetic is checked and its threads detected, or every request is
refused. docs/snapstart.md says why each step is there.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..engine import cpu
from ..engine.errors import ModelLoadError
from ..engine.loading import build_encoder, check_arithmetic
from ..engine.self_check import MARGIN, cosine_to_reference
from ..engine.service import PROBE_TEXT, EmbeddingService
from ..http.errors import error_answer
from .events import proxy_response, rest_proxy_event
from .sizing import lambda_cpus
from .types import Handler, ProxyResponse, RestApiEvent

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics

    from ..parts import Parts

#: Set by Lambda for the init of a SnapStart version (snap-start), else on-demand or
#: provisioned-concurrency.
INITIALIZATION_TYPE = "AWS_LAMBDA_INITIALIZATION_TYPE"
SNAP_START = "snap-start"

#: Why requests are refused between the snapshot and a restore whose checks passed.
NOT_RESTORED = "the environment was restored without its after-restore checks"

#: The most the after-restore read of the API keys may take before the restore fails closed:
#: Lambda allows the runtime and the after-restore hooks 10 s together, and the arithmetic
#: checks (two probes; a session rebuilt when the thread count changed) follow the read.
KEY_READ_DEADLINE_SECONDS = 3.0


def snap_start_init(environ: Mapping[str, str] = os.environ) -> bool:
    """This init is a SnapStart init: the process will be snapshotted and restored."""
    return environ.get(INITIALIZATION_TYPE) == SNAP_START


class SnapStart:
    """The before-snapshot and after-restore hooks of one initialized function."""

    def __init__(
        self, parts: Parts, *, asgi_handler: Handler, logger: Logger, metrics: Metrics
    ) -> None:
        self.service = parts.service
        #: What the init built the service from: the session is rebuilt from it.
        self.plan = parts.plan
        #: The function's settings: the thread count is detected again from them.
        self.settings = parts.settings
        self.asgi_handler = asgi_handler
        from ..http.auth import ApiKeyAuthenticator

        # A function's keys come from the secret (assembly.require_auth_mode refuses a file).
        assert parts.authenticator is None or isinstance(parts.authenticator, ApiKeyAuthenticator)
        self.authenticator = parts.authenticator
        self.logger = logger
        self.metrics = metrics
        #: Why requests are refused now (None: serving).
        self.refusal: str | None = None
        #: The probe's vector as the snapshot host computed it (not a secret).
        self.snapshot_vector: np.ndarray | None = None

    def register(self) -> None:
        """Register the hooks with the runtime (snapshot_restore_py's registries)."""
        from snapshot_restore_py import register_after_restore, register_before_snapshot

        register_before_snapshot(self.before_snapshot)
        register_after_restore(self.after_restore)

    # --- before the snapshot -------------------------------------------------------------

    def before_snapshot(self) -> None:
        """Warm the request path, record the probe, then drop what the key check held."""
        began = time.perf_counter()
        if self.authenticator is None:
            self.warm_up(None)
        else:
            with self.authenticator.warm_up_key() as key:  # every key dropped after it
                self.warm_up(key)
        self.snapshot_vector = probe_vector(self.service)
        # The warm-up's metrics are not a request's: the first restored request publishes
        # only its own.
        self.metrics.clear_metrics()
        self.refusal = NOT_RESTORED
        # Collect the warm-up request's cycles before the snapshot.
        gc.collect()
        self.logger.info(
            "snapshot: request path warmed, no key held",
            extra={"before_snapshot_s": round(time.perf_counter() - began, 4)},
        )

    def warm_up(self, key: str | None) -> None:
        """One real embeddings request through Mangum and the whole app, the key check
        included when `key` is given (the authenticator's warm-up key, never a real one);
        raises unless it is a 200."""
        headers = {"content-type": "application/json", "host": "snapstart.warm-up"}
        if key is not None:
            headers["authorization"] = "Bearer " + key
        body = json.dumps({"model": self.service.model_id, "input": [PROBE_TEXT]})
        result = self.asgi_handler(warm_up_event(headers, body), warm_up_context())
        status = result.get("statusCode")
        if status != 200:
            raise ModelLoadError(f"SnapStart warm-up request was answered {status}, not 200")

    # --- after a restore ---------------------------------------------------------------

    def after_restore(self) -> None:
        """Read the keys again, check this host's arithmetic, detect the threads, record it.
        Raises (and keeps refusing requests) if any of it fails."""
        from aws_lambda_powertools.metrics import MetricUnit
        from aws_lambda_powertools.metrics.provider.cold_start import reset_cold_start_flag

        began = time.perf_counter()
        self.refusal = "the after-restore checks did not pass"
        try:
            keys = (
                self.authenticator.reload(timeout=KEY_READ_DEADLINE_SECONDS)
                if self.authenticator is not None
                else None
            )
            threads = self.redetect_threads()
            cosine = self.check_arithmetic()
        except Exception:
            self.logger.exception("restore failed: this environment refuses every request")
            raise
        self.refusal = None
        reset_cold_start_flag()  # type: ignore[no-untyped-call]  # a restore is a cold start: the next request says so
        self.metrics.add_metric(name="SnapStartRestores", unit=MetricUnit.Count, value=1)
        self.logger.info(
            "restored from a snapshot",
            extra={
                "cpu": cpu.cpu_description(),
                "intra_op_threads": threads,
                "probe_cosine_to_snapshot": round(cosine, 7),
                "api_keys": keys,
                "after_restore_s": round(time.perf_counter() - began, 4),
            },
        )

    def redetect_threads(self) -> int:
        """The thread count for this host; a session built for another count is rebuilt, as
        the init built it (loading.build_encoder)."""
        session = self.settings.session_config(cpus=lambda_cpus)
        threads = session.intra_op_threads
        snapshot_threads = self.service.encoder.intra_op_threads
        if threads != snapshot_threads:
            self.logger.info(
                "restored on a host with another CPU allowance: rebuilding the session",
                extra={"snapshot_threads": snapshot_threads, "threads": threads},
            )
            self.plan = self.plan.with_session(session)
            self.service.encoder = build_encoder(self.plan)
        return threads

    def check_arithmetic(self) -> float:
        """The init's CPU checks on this host (loading.check_arithmetic), and the probe
        against the snapshot's: the probe's cosine to the snapshot host's vector
        (ModelLoadError below 1 - MARGIN)."""
        cpu.int8_kernel_product.cache_clear()  # the snapshot host's answer is not this one's
        vector = check_arithmetic(uncached(self.service))
        if self.snapshot_vector is None:
            raise ModelLoadError("restored without a snapshot: the before-snapshot hook never ran")
        cosine = cosine_to_reference(vector, self.snapshot_vector.astype(np.float64))
        if cosine < 1.0 - MARGIN:
            raise ModelLoadError(
                f"after restore on this {cpu.cpu_description()}: the probe text's vector has "
                f"cosine {cosine:.6f} to the one computed before the snapshot, below "
                f"{1.0 - MARGIN}: this host computes different vectors (see docs/cpus.md)"
            )
        return cosine

    # --- while refusing ----------------------------------------------------------------

    def refused(self) -> ProxyResponse:
        """The proxy response for any request while `refusal` holds: a 500 in OpenAI's
        shape, whose body never says why (the log does)."""
        self.logger.error("request refused", extra={"reason": self.refusal})
        return proxy_response(error_answer(ModelLoadError(self.refusal or NOT_RESTORED)))


def uncached(service: EmbeddingService) -> EmbeddingService:
    """The service's model without its vector cache: a probe through it is computed now."""
    return EmbeddingService(service.manifest, service.tokenizer, service.encoder)


def probe_vector(service: EmbeddingService) -> np.ndarray:
    """The probe computed now, never from the vector cache."""
    return uncached(service).probe().copy()


def warm_up_event(headers: dict[str, str], body: str) -> RestApiEvent:
    """An API Gateway REST (v1) proxy event for POST /v1/embeddings."""
    return rest_proxy_event(
        "POST",
        "/v1/embeddings",
        headers=headers,
        body=body,
        stage="snapstart",
        request_id="snapstart-warm-up",
    )


@dataclass
class WarmUpContext:
    """What Mangum and the app read of Lambda's context object (types.LambdaContext)."""

    function_name: str = "snapstart-warm-up"
    aws_request_id: str = "snapstart-warm-up"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def warm_up_context() -> WarmUpContext:
    """The context of the warm-up request."""
    return WarmUpContext()
