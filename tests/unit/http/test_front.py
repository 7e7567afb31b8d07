"""The front layer at the ASGI level: the end of the grace period, in event-loop order.

A real server (`tests/functional/serve/test_serve_shutdown.py`) shows the behaviour end to end but
cannot choose when a computation ends; here the app behind the front finishes at the exact
moment the grace period ends, which a server meets only by chance (CI met it once: uvicorn
answered a plain-text 500 because the front returned before its 503 was written).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from siglip_text.http.admission import Admission
from siglip_text.http.front import Front

from devkit.openai_shapes import assert_openai_error

BODY = json.dumps({"input": "a red block"}).encode()
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "POST",
    "scheme": "http",
    "path": "/v1/embeddings",
    "raw_path": b"/v1/embeddings",
    "query_string": b"",
    "root_path": "",
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))],
    "client": ("127.0.0.1", 50000),
    "server": ("testserver", 80),
}


def test_a_request_cut_as_its_app_finishes_returns_only_once_the_503_is_written() -> None:
    async def scenario() -> list[dict[str, Any]]:
        ingress: Front

        async def app_finishing_as_the_grace_period_ends(scope: Any, receive: Any, send: Any):
            await receive()
            while not ingress.expired:
                await asyncio.sleep(0)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        ingress = Front(
            admission=Admission(in_flight=1, pending=0),
            max_body_bytes=1 << 20,
            routes=[("POST", "/v1/embeddings")],
            body_routes=frozenset({("POST", "/v1/embeddings")}),
        )
        ingress.around(app_finishing_as_the_grace_period_ends)
        sent: list[dict[str, Any]] = []
        delivered = [{"type": "http.request", "body": BODY, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if delivered:
                return delivered.pop()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def serve() -> list[dict[str, Any]]:
            await ingress(dict(SCOPE), receive, send)
            return list(sent)  # what the server finds when the call returns, in its own task

        expired = asyncio.Event()
        request = asyncio.create_task(serve())
        await asyncio.sleep(0.01)  # the request is in the app
        ingress.begin_shutdown(0.05, on_expired=expired.set)
        at_return = await request
        await asyncio.wait_for(expired.wait(), 5)
        return at_return

    # GIVEN a request in the app when the grace period ends, the app finishing at that moment
    at_return = asyncio.run(scenario())
    # THEN by the time the front returns its 503 is whole: nothing of the app's 200 got out
    assert [m["type"] for m in at_return] == ["http.response.start", "http.response.body"]
    start, body = at_return
    assert start["status"] == 503
    assert not body.get("more_body", False)
    error = json.loads(body["body"])
    assert_openai_error(error)
    assert error["error"]["code"] == "server_shutting_down"


def test_a_body_past_the_limit_on_its_last_message_is_answered_without_waiting_for_more() -> None:
    async def scenario() -> tuple[list[dict[str, Any]], int]:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            raise AssertionError("a body past the limit never reaches the app")

        front = Front(
            admission=Admission(in_flight=1, pending=0),
            max_body_bytes=8,
            routes=[("POST", "/v1/embeddings")],
            body_routes=frozenset({("POST", "/v1/embeddings")}),
        )
        front.around(app)
        sent: list[dict[str, Any]] = []
        reads_after_the_end = 0
        # Mangum and in-process ASGI deliver the whole body as one last message; the declared
        # length is within the limit so that the refusal comes from the bytes read.
        delivered = [{"type": "http.request", "body": BODY, "more_body": False}]

        async def receive() -> dict[str, Any]:
            nonlocal reads_after_the_end
            if delivered:
                return delivered.pop()
            reads_after_the_end += 1
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = dict(SCOPE, headers=[(b"content-type", b"application/json")])
        await asyncio.wait_for(front(scope, receive, send), 30)
        return sent, reads_after_the_end

    # GIVEN a body whose only (and last) message takes it past the limit
    sent, reads_after_the_end = asyncio.run(scenario())
    # THEN the 413 is whole and the front never waited for a message that cannot come
    assert reads_after_the_end == 0
    assert sent[0]["status"] == 413
    assert not sent[-1].get("more_body", False)
    assert_openai_error(json.loads(sent[1]["body"]))
