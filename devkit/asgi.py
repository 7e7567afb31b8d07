"""Calling the ASGI app directly, with raw bytes and headers (no client in between)."""

from __future__ import annotations

import asyncio
from typing import Any


def asgi_call(
    app: Any,
    body: bytes,
    headers: dict[str, str],
    *,
    method: str = "POST",
    path: str = "/v1/embeddings",
    timeout: float = 60.0,
    loop: asyncio.AbstractEventLoop | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request straight through the ASGI app, body streamed in 64 KiB chunks.

    Header values go in as raw bytes, as a server or API Gateway could hand them over
    (latin-1 when they fit, else UTF-8); an HTTP client library would refuse some of them.
    """
    raw_headers = [(k.lower().encode("latin-1"), _header_bytes(v)) for k, v in headers.items()]
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogatepass"),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await asyncio.Event().wait()  # the client stays connected until the answer
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    runner = loop or asyncio.new_event_loop()
    try:
        runner.run_until_complete(asyncio.wait_for(app(scope, receive, send), timeout))
    except Exception as exc:  # Starlette re-raises after sending its 500: report it as one
        if not any(m["type"] == "http.response.start" for m in sent):
            return 500, {}, repr(exc).encode()
    finally:
        if loop is None:
            runner.close()
    start = next(m for m in sent if m["type"] == "http.response.start")
    answer_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start["headers"]}
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], answer_headers, content


def _header_bytes(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")
