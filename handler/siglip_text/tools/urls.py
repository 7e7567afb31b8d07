"""One rule for the endpoint URL every tool takes: with or without ``/v1``, same meaning.

``http://host:8000``, ``http://host:8000/``, ``http://host:8000/v1`` and
``http://host:8000/v1/embeddings`` name one deployment; an API Gateway stage path
(``https://id.execute-api.region.amazonaws.com/Prod``) is kept as its root. Standard library
only: load-test runs with nothing but the package.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from .exit_status import ToolError

#: Paths that name an endpoint of the API rather than its root.
_API_SUFFIXES = ("/v1/embeddings", "/v1/models", "/v1", "/health")


def service_root(url: str) -> str:
    """The deployment's root, without ``/v1`` or a trailing slash (``/health`` hangs off it)."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(
            f"--url {url!r}: expected http(s)://HOST[:PORT][/PATH], with or without /v1"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ToolError(f"--url {url!r}: the port is not a number") from None
    path = parts.path.rstrip("/")
    for suffix in _API_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def openai_base_url(url: str) -> str:
    """The ``base_url`` an OpenAI client takes: the root plus ``/v1``."""
    return service_root(url) + "/v1"
