"""An API Gateway REST API (v1) proxy event, as the gateway sends the function a request.

The SnapStart warm-up (snapstart.py) sends one through Mangum to warm the request path.
"""

from __future__ import annotations

from typing import Any


def rest_proxy_event(
    method: str,
    path: str,
    *,
    headers: dict[str, str],
    body: str | None,
    stage: str,
    request_id: str,
) -> dict[str, Any]:
    """The event for one request; ``headers`` as the client sent them."""
    identity = {"sourceIp": "127.0.0.1"}
    if "User-Agent" in headers:
        identity["userAgent"] = headers["User-Agent"]
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
            "stage": stage,
            "requestId": request_id,
            "identity": identity,
        },
        "body": body,
        "isBase64Encoded": False,
    }
