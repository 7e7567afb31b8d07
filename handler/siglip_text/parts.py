"""The running parts the assembly hands each platform to mount (docs/architecture.md, "The
assembly"): below the platforms, so that each can name what it is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .engine.loading import InitPlan
    from .engine.service import EmbeddingService
    from .http.auth import ApiKeyAuthenticator, KeyFileAuthenticator
    from .http.front import Front
    from .settings import Settings


@dataclass(frozen=True)
class Parts:
    """What one assembly built: the settings, the init's plan, the service, the key check
    (auth mode ``api-key``), the front door and the app it stands before."""

    settings: Settings
    plan: InitPlan
    service: EmbeddingService
    authenticator: ApiKeyAuthenticator | KeyFileAuthenticator | None
    front: Front
    app: FastAPI
