"""Settings, read once from ``SIGLIP_*`` environment variables into validated types."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .bundle import MANIFEST_FILE, ONNX_FILE, TOKENIZER_FILE, BundlePaths
from .errors import ConfigError

ENV_PREFIX = "SIGLIP_"

#: Lambda gives one full vCPU per 1,769 MB of memory.
LAMBDA_MB_PER_VCPU = 1769
#: The most inputs ``SIGLIP_MAX_INPUTS_PER_REQUEST`` may allow (the request schema's own bound).
MAX_INPUTS_CEILING = 100_000

#: The vector cache's default bound in bytes (SIGLIP_CACHE_MAX_BYTES).
CACHE_MAX_BYTES = 64 * 1024 * 1024


def demo_model_dir() -> Path:
    """The bundled demo model (synthetic: trained on toy captions, not SigLIP weights)."""
    return Path(__file__).resolve().parents[1] / "demo"


class Settings(BaseSettings):
    """Every tunable of the service. Each field is ``SIGLIP_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    model_dir: Path | None = None
    model_manifest_path: Path | None = None
    onnx_model_path: Path | None = None
    tokenizer_path: Path | None = None
    onnx_output_name: str = Field(default="text_embeds", min_length=1)

    max_text_batch_size: int = Field(default=32, ge=1, le=4096)
    ort_intra_op_threads: int | None = Field(default=None, ge=1, le=256)
    ort_allow_spinning: bool = False
    ort_graph_optimization: Literal["auto", "disable", "basic", "extended", "all"] = "auto"

    max_inputs_per_request: int = Field(default=2048, ge=1, le=MAX_INPUTS_CEILING)
    max_request_bytes: int = Field(default=6 * 1024 * 1024, ge=1024)
    max_concurrent_requests: int = Field(default=1, ge=1, le=1024)
    max_pending_requests: int = Field(default=32, ge=0, le=100_000)
    shutdown_grace_seconds: float = Field(default=15.0, ge=0, le=3600)
    # `serve` only: a body must keep arriving (idle) and be complete (total) within these,
    # else 408; a connection's request headers must be complete within header_timeout of
    # its opening (or of its previous answer), else it is closed; at max_connections open
    # connections the idlest one without a request makes room, else the newcomer gets 503.
    body_idle_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    body_total_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    max_connections: int = Field(default=1024, ge=1, le=100_000)

    # Requests that fit (limits.py). The largest answer a frontend can return: unset, it is
    # Lambda's 6 MB synchronous response on Lambda and no limit under `serve` (nothing there
    # buffers; set it when a proxy in front does).
    max_response_bytes: int | None = Field(default=None, ge=1024)
    # Of the invocation's remaining time, what the answer needs after the model (Lambda).
    time_reserve_ms: int = Field(default=500, ge=0, le=600_000)
    # The base path of a custom domain's API mapping, which API Gateway leaves in the event's
    # path (Mangum's api_gateway_base_path); unset or empty: none.
    api_base_path: str | None = Field(default=None, max_length=512)

    # Token-id inputs: "accept" embeds them as this model's ids; "reject" answers 400. Clients
    # that tokenize with tiktoken (LangChain's default) send ids of another vocabulary.
    token_id_inputs: Literal["accept", "reject"] = "accept"

    cache_size: int = Field(default=0, ge=0, le=10_000_000)
    # The cache's bound in bytes (keys, vectors, bookkeeping), whatever cache_size says.
    cache_max_bytes: int = Field(default=CACHE_MAX_BYTES, ge=0)
    log_inputs: bool = False

    auth_mode: Literal["none", "api-key"] = "none"
    api_key_secret_arn: str | None = None
    # Bounded: 0 would mean one Secrets Manager call per request. The staleness bound is how
    # long a revoked key may still pass while Secrets Manager cannot be read; it may equal the
    # cache period, since the read starts one read's time before it at the latest (auth.py).
    api_key_cache_seconds: int = Field(default=300, ge=10, le=3600)
    api_key_max_staleness_seconds: int = Field(default=900, ge=10, le=86400)

    @model_validator(mode="after")
    def _staleness_covers_the_cache(self) -> Settings:
        if self.api_key_max_staleness_seconds < self.api_key_cache_seconds:
            raise ValueError(
                f"{ENV_PREFIX}API_KEY_MAX_STALENESS_SECONDS must be at least "
                f"{ENV_PREFIX}API_KEY_CACHE_SECONDS"
            )
        return self

    @field_validator("model_dir", "model_manifest_path", "onnx_model_path", "tokenizer_path")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("api_base_path")
    @classmethod
    def _one_leading_slash(cls, value: str | None) -> str | None:
        """``siglip``, ``/siglip`` and ``/siglip/`` are one base path: ``/siglip``."""
        trimmed = (value or "").strip().strip("/")
        return f"/{trimmed}" if trimmed else None

    def artifact_paths(self) -> BundlePaths:
        """Manifest, ONNX and tokenizer paths: explicit variables win over SIGLIP_MODEL_DIR."""
        base = self.model_dir
        paths = []
        for explicit, name, var in (
            (self.model_manifest_path, MANIFEST_FILE, "MODEL_MANIFEST_PATH"),
            (self.onnx_model_path, ONNX_FILE, "ONNX_MODEL_PATH"),
            (self.tokenizer_path, TOKENIZER_FILE, "TOKENIZER_PATH"),
        ):
            if explicit is not None:
                paths.append(explicit)
            elif base is not None:
                paths.append(base / name)
            else:
                raise ConfigError(
                    f"{ENV_PREFIX}{var} is not set (set it, or {ENV_PREFIX}MODEL_DIR for all "
                    "three artifacts)"
                )
        return BundlePaths(*paths)

    def intra_op_threads(self) -> int:
        """The ORT intra-op thread count: the setting, else the CPUs this process may use."""
        return self.ort_intra_op_threads or available_cpus()


def load_settings(**overrides: object) -> Settings:
    """Parse the environment (plus overrides); raise ConfigError naming each bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            if not err["loc"]:  # a check across fields names them in its message
                problems.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            field = str(err["loc"][0])
            problems.append(f"{ENV_PREFIX}{field.upper()}: {err['msg']}")
        raise ConfigError("invalid settings: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, parsed once."""
    return load_settings()


#: Set by Lambda Managed Instances: the Python runtime's worker processes per execution
#: environment (its `PerExecutionEnvironmentMaxConcurrency`), each a process doing its own
#: init and sharing the environment's CPUs with the others.
MAX_CONCURRENCY_VARIABLE = "AWS_LAMBDA_MAX_CONCURRENCY"

#: Set by Lambda: the function's memory in MB.
MEMORY_SIZE_VARIABLE = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"


def processes_per_environment(environ: Mapping[str, str] | None = None) -> int | None:
    """The processes sharing this environment under Lambda Managed Instances, else None."""
    env = os.environ if environ is None else environ
    raw = env.get(MAX_CONCURRENCY_VARIABLE, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def available_cpus(
    environ: Mapping[str, str] | None = None,
    *,
    affinity: int | None = None,
    cgroup_root: Path | None = None,
) -> int:
    """CPUs this process may actually use: affinity, cgroup quota and its share of them.

    ``os.cpu_count()`` reports the host's cores, which on Lambda and in containers is more
    than the share paid for; oversubscribed ORT threads then fight for it. On Lambda
    (default) an environment runs one request and its CPU share follows the memory size
    (one vCPU per 1,769 MB). Under Lambda Managed Instances ``AWS_LAMBDA_MAX_CONCURRENCY``
    processes share the environment's CPUs, whatever its memory: each gets its share of
    them, at least 1. ``affinity`` and ``cgroup_root`` stand for this process's (tests).
    """
    env = os.environ if environ is None else environ
    count = _affinity_cpus() if affinity is None else affinity
    quota = _cgroup_cpu_quota() if cgroup_root is None else _cgroup_cpu_quota(cgroup_root)
    if quota is not None:
        count = min(count, quota)
    processes = processes_per_environment(env)
    if processes is not None:
        return max(1, count // processes)
    memory_mb = env.get(MEMORY_SIZE_VARIABLE)
    if memory_mb and memory_mb.isdigit():
        count = min(count, max(1, round(int(memory_mb) / LAMBDA_MB_PER_VCPU)))
    return max(1, count)


def _affinity_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Whole CPUs allowed by the cgroup (v2 ``cpu.max`` or v1 CFS quota), rounded up."""
    try:
        text = (root / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return max(1, math.ceil(int(text[0]) / int(text[1])))
        if text:
            return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        if quota > 0 and period > 0:
            return max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        pass
    return None
