"""The files in events/, driven generically: every file, its query texts, its model."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from devkit import ROOT

EVENTS = ROOT / "events"


def event_files() -> list[Path]:
    """Every event file, so that a new one is driven without touching the tests."""
    return sorted(EVENTS.glob("*.json"))


def request_texts(event: dict[str, Any]) -> list[str]:
    """The query texts an event carries (they must never reach a log)."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    try:
        payload = json.loads(body)
    except ValueError:
        return []
    texts = payload.get("input") if isinstance(payload, dict) else None
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, list):
        return [t for t in texts if isinstance(t, str)]
    return []


def for_model(event: dict[str, Any], model_id: str) -> dict[str, Any]:
    """The event with the model its request names (the demo's) replaced by `model_id`, so
    that it asks a function serving another bundle the same question."""
    body = event.get("body") or ""
    encoded = bool(event.get("isBase64Encoded"))
    try:
        payload = json.loads(base64.b64decode(body).decode() if encoded else body)
    except ValueError:
        return event
    if not isinstance(payload, dict) or "model" not in payload:
        return event
    text = json.dumps({**payload, "model": model_id})
    return {**event, "body": base64.b64encode(text.encode()).decode() if encoded else text}
