"""A Lambda function URL in front of a handler, for an httpx (or openai) client in-process.

Each request becomes the event a function URL sends (payload format 2.0: route key and stage
`$default`, lowercase headers, the body base64-encoded when its content type is binary) and
the handler's answer becomes the HTTP response, as AWS documents it ("Invoking Lambda function
URLs", request and response payloads). What only AWS does in front of the function (SigV4,
throttling, the 6 MB payload limit) is not reproduced.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from typing import Any

import httpx

URL_ID = "a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6"
HOST = f"{URL_ID}.lambda-url.us-east-1.on.aws"
#: Content types whose body a function URL passes as text; any other is base64-encoded.
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-www-form-urlencoded")

_request_ids = itertools.count(1)


def is_text(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media.startswith(TEXT_TYPES) or media.endswith("+json")


def event_for(request: httpx.Request) -> dict[str, Any]:
    """The function URL event of an HTTP request."""
    headers: dict[str, str] = {}
    for name, value in request.headers.multi_items():
        name = name.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    headers["host"] = HOST
    headers.setdefault("x-forwarded-proto", "https")
    body = request.content
    binary = bool(body) and not is_text(headers.get("content-type", ""))
    query = request.url.query.decode()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": request.url.path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": URL_ID,
            "domainName": HOST,
            "domainPrefix": URL_ID,
            "http": {
                "method": request.method,
                "path": request.url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": f"00000000-0000-4000-8000-{next(_request_ids):012d}",
            "routeKey": "$default",
            "stage": "$default",
            "time": "30/Nov/2026:01:00:00 +0000",
            "timeEpoch": 1795914000000,
        },
        "isBase64Encoded": binary,
    }
    if query:
        event["queryStringParameters"] = dict(request.url.params.multi_items())
    if body:
        event["body"] = base64.b64encode(body).decode() if binary else body.decode()
    return event


def response_for(result: dict[str, Any], request: httpx.Request) -> httpx.Response:
    """The HTTP response a function URL makes of the handler's answer."""
    body = result.get("body", "")
    content = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
    headers = list((result.get("headers") or {}).items())
    headers += [("set-cookie", cookie) for cookie in result.get("cookies") or []]
    return httpx.Response(result["statusCode"], headers=headers, content=content, request=request)


def transport(
    handler: Callable[[dict[str, Any], Any], dict[str, Any]],
    context: Any,
    *,
    events: list[dict[str, Any]] | None = None,
) -> httpx.MockTransport:
    """An httpx transport that serves every request through ``handler`` as a function URL
    would; each event sent is appended to ``events``."""

    def serve(request: httpx.Request) -> httpx.Response:
        request.read()
        event = event_for(request)
        if events is not None:
            events.append(event)
        return response_for(handler(event, context), request)

    return httpx.MockTransport(serve)
