"""A branch or tag given as ``--revision``, resolved once to the commit SHA it names now.

The manifest pins a full 40-hex commit SHA (a branch moves; a tag can be moved). A user who
knows only ``main`` or ``v1.0`` gets it resolved through the Hub's model-info API
(``huggingface_hub.HfApi.model_info(repo, revision=...).sha``); the SHA is printed and used
from then on. Offline (``HF_HUB_OFFLINE``) or when the Hub cannot be reached, the refusal
says how to find the SHA by hand.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ...engine.contract import REVISION_PATTERN
from ..exit_status import ToolError

#: huggingface_hub's own reading of its boolean variables (``constants._is_true``).
_TRUE = {"1", "ON", "YES", "TRUE"}


def is_commit_sha(revision: str) -> bool:
    return re.fullmatch(REVISION_PATTERN, revision) is not None


def hub_offline() -> bool:
    """Whether the user asked for no Hub access, read now (huggingface_hub reads it once)."""
    return any(
        os.environ.get(name, "").upper() in _TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def how_to_find_sha(repository: str, revision: str) -> str:
    """Where a user finds the full commit SHA of ``revision`` without this tool."""
    return (
        f"find the full commit SHA of {revision!r} on https://huggingface.co/{repository}/commits/"
        f"{revision} (each commit's full id), or with "
        f"`git ls-remote https://huggingface.co/{repository} {revision}`, or with "
        f'`python -c "from huggingface_hub import HfApi; '
        f"print(HfApi().model_info('{repository}', revision='{revision}').sha)\"`; "
        "then pass it as --revision"
    )


def resolve_revision(repository: str, revision: str, *, endpoint: str | None = None) -> str:
    """The commit SHA that ``revision`` (a branch, a tag or a SHA) of a Hub repository names.

    ``endpoint``: the Hub's base URL (default ``$HF_ENDPOINT``, else huggingface.co).
    """
    if is_commit_sha(revision):
        return revision
    if hub_offline():
        raise ToolError(
            f"--revision {revision!r} is a branch or tag, and the Hub is offline "
            "(HF_HUB_OFFLINE): the manifest must pin a commit SHA; "
            + how_to_find_sha(repository, revision)
        )
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise ToolError(
            f"--revision {revision!r} is a branch or tag and huggingface_hub is not installed "
            f"to resolve it; {how_to_find_sha(repository, revision)}"
        ) from None
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None)
    try:
        sha = api.model_info(repository, revision=revision).sha
    except Exception as exc:  # the network boundary: not found, refused, offline, gated
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolError(
            f"--revision {revision!r} of {repository} could not be resolved to a commit SHA "
            f"({type(exc).__name__}: {reason}); {how_to_find_sha(repository, revision)}"
        ) from None
    if not sha or not is_commit_sha(sha):
        raise ToolError(
            f"the Hub answered {sha!r} for {repository}@{revision}, not a commit SHA; "
            f"{how_to_find_sha(repository, revision)}"
        )
    return sha


def hub_revision(source: str, revision: str | None) -> str | None:
    """``revision`` as the commit SHA, resolved when ``source`` is a Hub id and ``revision``
    a branch or tag; otherwise as given (a local directory, no revision, already a SHA)."""
    if (
        revision is None
        or is_commit_sha(revision)
        or Path(source).expanduser().exists()
        or source.count("/") != 1
        or source.startswith((".", "/", "~"))
    ):
        return revision
    return resolve_revision(source, revision)
