"""Settings, read once from ``SIGLIP_*`` environment variables into validated types, and
turned into the plain values the engine is built from (`Settings.init_plan`).

Every layer's knobs live here, above the engine, which never imports this module
(docs/architecture.md, "Import contracts").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .engine.bundle import MANIFEST_FILE, ONNX_FILE, TOKENIZER_FILE, BundlePaths
from .engine.errors import ConfigError

if TYPE_CHECKING:
    from .engine.encoder import SessionConfig
    from .engine.loading import InitPlan
    from .engine.service import EmbeddingService

ENV_PREFIX = "SIGLIP_"

#: The most inputs ``SIGLIP_MAX_INPUTS_PER_REQUEST`` may allow (the request schema's own bound).
MAX_INPUTS_CEILING = 100_000

#: The vector cache's default bound in bytes (SIGLIP_CACHE_MAX_BYTES).
CACHE_MAX_BYTES = 64 * 1024 * 1024

#: Counts the CPUs the ONNX Runtime threads may use when no count is set (None:
#: engine.cpu.usable_cpus); a platform passes its own share (Lambda: aws/sizing.py).
CpuCount = Callable[[], int]


#: ``SIGLIP_MAX_INPUTS_PER_REQUEST``: a number, or "auto" (derived from the deployment).
MaxInputs = Annotated[int, Field(ge=1, le=MAX_INPUTS_CEILING)] | Literal["auto"]


def demo_model_dir() -> Path:
    """The bundled demo model (synthetic: trained on toy captions, not SigLIP weights)."""
    return Path(__file__).resolve().parent / "demo"


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

    # "auto": derived at init from what the deployment can answer (http/inputs_bound.py).
    max_inputs_per_request: MaxInputs = "auto"
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
    # The function's Timeout, which Lambda does not tell the function (the template sets
    # it): the time side of the "auto" inputs per request. Unset: no time bound (`serve`).
    function_timeout_seconds: float | None = Field(default=None, gt=0, le=900)
    # The base path of a custom domain's API mapping, which API Gateway leaves in the event's
    # path (Mangum's api_gateway_base_path); unset or empty: none.
    api_base_path: str | None = Field(default=None, max_length=512)

    # Token-id inputs: "reject" (default) answers 400; "accept" embeds them as this model's
    # ids. Clients that tokenize with tiktoken (LangChain's default) send ids of another
    # vocabulary, which a 256k vocabulary takes without complaint: a wrong vector with 200.
    token_id_inputs: Literal["accept", "reject"] = "reject"

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
    # `serve` only: the keys in a file of one key per line, private to its owner, instead of
    # the secret (http/key_file.py); its changes are picked up within the check period, at
    # most a minute. Set without an auth mode, it means api-key; with none, it is refused.
    api_key_file: Path | None = None
    api_key_file_check_seconds: float = Field(default=10.0, gt=0, le=60)

    @model_validator(mode="before")
    @classmethod
    def _key_file_means_api_key(cls, data: object) -> object:
        if not isinstance(data, dict) or "api_key_file" not in data:
            return data
        path = data["api_key_file"]
        if isinstance(path, str) and not path.strip():  # set but empty: not set
            return {k: v for k, v in data.items() if k != "api_key_file"}
        if path is not None and not data.get("auth_mode"):
            return {**data, "auth_mode": "api-key"}
        return data

    @model_validator(mode="after")
    def _one_key_source(self) -> Settings:
        if self.api_key_file is None:
            return self
        if self.auth_mode != "api-key":
            raise ValueError(
                f"{ENV_PREFIX}API_KEY_FILE (--api-key-file) holds API keys: it needs auth mode "
                f"api-key, not {self.auth_mode}"
            )
        if self.api_key_secret_arn:
            raise ValueError(
                f"{ENV_PREFIX}API_KEY_FILE and {ENV_PREFIX}API_KEY_SECRET_ARN are both set: "
                "the keys come from one source, the file or the secret"
            )
        return self

    @model_validator(mode="after")
    def _staleness_covers_the_cache(self) -> Settings:
        if self.api_key_max_staleness_seconds < self.api_key_cache_seconds:
            raise ValueError(
                f"{ENV_PREFIX}API_KEY_MAX_STALENESS_SECONDS must be at least "
                f"{ENV_PREFIX}API_KEY_CACHE_SECONDS"
            )
        return self

    @field_validator(
        "model_dir", "model_manifest_path", "onnx_model_path", "tokenizer_path", "api_key_file"
    )
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
                    "three artifacts; on the command line: --model-dir DIR, or --demo for the "
                    "bundled demo model)"
                )
        return BundlePaths(*paths)

    def intra_op_threads(self, cpus: CpuCount | None = None) -> int:
        """The ORT intra-op thread count: the setting, else the CPUs ``cpus`` counts."""
        if self.ort_intra_op_threads:
            return self.ort_intra_op_threads
        # The engine's heavy modules (ONNX Runtime, tokenizers) import only when an init
        # needs them: the command line and the schemas read settings too.
        from .engine.cpu import usable_cpus

        return (cpus or usable_cpus)()

    def session_config(self, *, cpus: CpuCount | None = None) -> SessionConfig:
        """The ONNX Runtime session these settings ask for (``auto`` optimization: the
        bundle's manifest decides when the session is built)."""
        from .engine.encoder import SessionConfig

        return SessionConfig(
            intra_op_threads=self.intra_op_threads(cpus),
            allow_spinning=self.ort_allow_spinning,
            max_batch_size=self.max_text_batch_size,
            graph_optimization=self.ort_graph_optimization,
        )

    def init_plan(self, *, cpus: CpuCount | None = None) -> InitPlan:
        """The plan of the init these settings ask for; the manifest read (ModelLoadError if
        it is bad)."""
        from .engine.loading import InitPlan

        return InitPlan.read(
            self.artifact_paths(),
            self.session_config(cpus=cpus),
            output_name=self.onnx_output_name,
            cache_size=self.cache_size,
            cache_max_bytes=self.cache_max_bytes,
        )


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


def load_service(settings: Settings) -> EmbeddingService:
    """The whole init, from these settings (the tools, and tests of a service alone)."""
    from .engine.loading import ServiceInit

    began = time.perf_counter()  # the init's timings count the manifest's read
    return ServiceInit.start(settings.init_plan(), began=began).service()
