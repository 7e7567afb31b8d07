"""Lambda proxy events: the one the function sends itself, and what Mangum can read.

`rest_proxy_event` is an API Gateway REST API (v1) proxy event, as the gateway sends the
function a request: the SnapStart warm-up (snapstart.py) sends one through Mangum to warm
the request path. `as_mangum_reads` checks an incoming event before any work, so that the
handler answers any event a client can shape (`proxy_response`) instead of raising.
"""

from __future__ import annotations

import base64
import binascii
import re

from ..engine.errors import InvalidInputError
from ..engine.json_value import JSONObject, JSONValue
from ..http.errors import ErrorAnswer, InvalidHostError, short
from .types import ProxyResponse, RestApiEvent


def rest_proxy_event(
    method: str,
    path: str,
    *,
    headers: dict[str, str],
    body: str | None,
    stage: str,
    request_id: str,
) -> RestApiEvent:
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


def proxy_response(answer: ErrorAnswer) -> ProxyResponse:
    """An error answer as the Lambda proxy response API Gateway and function URLs relay."""
    return {
        "statusCode": answer.status,
        "headers": {**answer.headers, "content-type": "application/json"},
        "body": answer.body.decode("utf-8"),
        "isBase64Encoded": False,
    }


def as_mangum_reads(event: object) -> JSONObject:
    """The event as Mangum can read it, or the error (an OpenAI 400) that says why it cannot.

    Checked before any work: Mangum raises on some events, and a function error is a 502
    (API Gateway: "If the function runs but returns an error [...] API Gateway returns a
    502", https://docs.aws.amazon.com/lambda/latest/dg/services-apigateway-errors.html),
    which OpenAI clients retry; so they are answered here instead:

    - no ``requestContext``, neither a ``version`` (HTTP API, function URL) nor a
      ``resource`` (REST API), or a field Mangum reads for its request absent or not of the
      type it reads it as (`_malformed`: the method and path, every header name and value a
      string, a REST event's multiValueHeaders lists of strings, query parameters, v2's
      ``rawQueryString`` and ``cookies``, the body a string or null): a 400 naming the
      event's shape and the fields;
    - any of those strings with a lone surrogate (JSON can carry ``\\ud800``; UTF-8
      cannot): a 400, as Mangum would raise encoding it;
    - ``isBase64Encoded`` with a body that is not base64: a 400. A good body is decoded here
      once and handed to Mangum as bytes (which it takes as they are);
    - a ``Host`` that is no host name (or IPv6 literal) and port of digits (RFC 9112
      section 3.2: a 400);
    - what Mangum parses only for the ASGI scope's ``server`` pair, which nothing in the app
      reads: an IPv6 literal ``Host`` (``[::1]:443``, valid, which Mangum cannot split), one
      with an empty port (``h:``, valid too) and an
      ``X-Forwarded-Port`` that is no number (``443,80`` from a chain of proxies, Mangum
      issue #303) are left out of Mangum's view, so the request is answered as usual;
    - last, the handler (aws/function.py) tries Mangum's own reading of the request (its
      ASGI scope) on the event as handed over: whatever it still cannot read is a 400 too.
    """
    if not isinstance(event, dict) or not isinstance(event.get("requestContext"), dict):
        raise InvalidInputError(
            "the Lambda event is not an API Gateway or function URL request: no requestContext"
        )
    shape = event_shape(event)
    if shape is None:
        raise InvalidInputError(
            "the Lambda event is not an API Gateway or function URL request: it has neither "
            "a version (HTTP API, function URL) nor a resource (REST API)"
        )
    missing = _missing(event) or _malformed(event)  # the second reads what the first checks
    if missing:
        raise InvalidInputError(
            f"the Lambda event ({shape}) cannot be read: it lacks (or has malformed) "
            + ", ".join(dict.fromkeys(missing))
        )
    readable = dict(event)
    readable["headers"] = event.get("headers") or {}
    if event.get("isBase64Encoded"):
        readable["body"], readable["isBase64Encoded"] = _decoded(event.get("body")), False
    _drop(readable, _unreadable_server_headers(_server_headers(event)))
    return readable


#: The headers Mangum parses into the ASGI scope's ``server`` pair.
SERVER_HEADERS = ("host", "x-forwarded-port")


def event_shape(event: JSONObject) -> str | None:
    """Which proxy event this is, as Mangum tells them apart (None: none it serves here)."""
    if "elb" in event["requestContext"]:
        return None  # an Application Load Balancer's: not a front this function is built for
    if "version" in event:
        return "HTTP API v2 or function URL" if event["version"] == "2.0" else "HTTP API v1"
    if "resource" in event:
        return "REST API v1"
    return None


def _missing(event: JSONObject) -> list[str]:
    """The fields Mangum reads of this kind of event (REST v1 and HTTP API v1: the method and
    path; HTTP API v2 and function URLs: requestContext.http's) that are absent or not of
    the type it reads them as."""
    context = event["requestContext"]
    if event.get("version") == "2.0":
        http = context.get("http")
        if not isinstance(http, dict):
            return ["requestContext.http"]
        fields = ("method", "path", "sourceIp")
        missing = [f"requestContext.http.{n}" for n in fields if not isinstance(http.get(n), str)]
    else:
        missing = [n for n in ("httpMethod", "path") if not isinstance(event.get(n), str)]
        if not isinstance(context.get("identity", {}), dict):  # read whenever it is there
            missing.append("requestContext.identity")
    for name in ("headers", "multiValueHeaders"):  # null is read as none
        if event.get(name) is not None and not isinstance(event[name], dict):
            missing.append(name)
    return missing


def _malformed(event: JSONObject) -> list[str]:
    """The fields Mangum reads as strings (or lists, or maps, of strings) that are not, or
    that hold a lone surrogate (no UTF-8 encodes it). The types are the payload formats'
    own (API Gateway's "Payload format structure": ``headers`` a map of strings, 1.0's
    ``multiValueHeaders`` lists of strings, 2.0's ``rawQueryString`` a string and ``cookies``
    a list of strings, https://docs.aws.amazon.com/apigateway/latest/developerguide/
    http-api-develop-integrations-lambda.html), so no event a gateway sends is refused."""
    found: list[str] = []
    v2 = event.get("version") == "2.0"
    headers = event.get("headers")
    if isinstance(headers, dict) and not _strings_map(headers):
        found.append("headers (each name and value a string)")
    multi = event.get("multiValueHeaders")
    if not v2 and isinstance(multi, dict) and not _lists_map(multi):
        found.append("multiValueHeaders (each a list of strings)")
    body = event.get("body")
    if body is not None and not isinstance(body, str):
        found.append("body (a string or null)")
    elif isinstance(body, str) and not event.get("isBase64Encoded") and not _utf8(body):
        found.append("body (text with a lone surrogate)")
    if v2:
        http = event["requestContext"]["http"]
        found += [f"requestContext.http.{n}" for n in ("method", "path") if not _utf8(http[n])]
        if not isinstance(event.get("rawQueryString", ""), str) or not _utf8(
            event.get("rawQueryString", "")
        ):
            found.append("rawQueryString (a string)")
        cookies = event.get("cookies")
        if cookies and not (isinstance(cookies, list) and all(_utf8(c) for c in cookies)):
            found.append("cookies (a list of strings)")
    else:
        found += [n for n in ("httpMethod", "path") if not _utf8(event[n])]
        single = event.get("queryStringParameters")
        if single and not (isinstance(single, dict) and _strings_map(single)):
            found.append("queryStringParameters (each name and value a string)")
        several = event.get("multiValueQueryStringParameters")
        if several and not (isinstance(several, dict) and _lists_map(several)):
            found.append("multiValueQueryStringParameters (each a list of strings)")
        identity = event["requestContext"].get("identity") or {}
        if identity.get("sourceIp") is not None and not _utf8(identity["sourceIp"]):
            found.append("requestContext.identity.sourceIp")
    return found


def _utf8(text: JSONValue) -> bool:
    """A string that UTF-8 encodes (no lone surrogate)."""
    if not isinstance(text, str):
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings_map(values: JSONObject) -> bool:
    return all(_utf8(k) and _utf8(v) for k, v in values.items())


def _lists_map(values: JSONObject) -> bool:
    return all(
        _utf8(k) and isinstance(v, list) and all(_utf8(item) for item in v)
        for k, v in values.items()
    )


def _decoded(body: JSONValue) -> bytes:
    """A base64 body's bytes, decoded as Mangum would (non-strict), or a 400."""
    try:
        return base64.b64decode(body or b"")
    except (binascii.Error, ValueError, TypeError):
        raise InvalidInputError(
            "the request body is marked base64-encoded (isBase64Encoded) but is not base64",
            param="body",
        ) from None


def _server_headers(event: JSONObject) -> JSONObject:
    """`SERVER_HEADERS` as Mangum reads them: names lower-cased, a REST event's
    multiValueHeaders over its headers (joined)."""
    found = {}
    for name, value in (event.get("headers") or {}).items():
        lowered = str(name).lower()
        if lowered in SERVER_HEADERS:
            found[lowered] = value
    if event.get("version") != "2.0":
        for name, values in (event.get("multiValueHeaders") or {}).items():
            lowered = str(name).lower()
            if lowered in SERVER_HEADERS:
                strings = isinstance(values, list) and all(isinstance(v, str) for v in values)
                found[lowered] = ", ".join(values) if strings else ""
    return found


def _unreadable_server_headers(headers: JSONObject) -> set[str]:
    """The headers Mangum cannot parse into the scope's ``server`` pair, which the app never
    reads; a 400 for a ``Host`` that is no host and port (RFC 9112 section 3.2)."""
    unreadable = set()
    host = headers.get("host")
    if isinstance(host, str):
        authority = _HOST.fullmatch(host)
        if authority is None:
            raise InvalidHostError(
                f"the Host header {short(host, 100)} is not a host name and port",
                param="Host",
            )
        if authority["name"].startswith("[") or authority["port"] == "":
            unreadable.add("host")  # valid (RFC 3986 section 3.2); Mangum cannot split it
        elif authority["port"] is not None:
            return unreadable  # Mangum reads the port from Host, not X-Forwarded-Port
    if "x-forwarded-port" in headers and not _integer(headers["x-forwarded-port"]):
        unreadable.add("x-forwarded-port")
    return unreadable


#: A ``Host`` value: a name or an IPv6 literal in brackets, then an optional port of digits.
_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]*\]|[^:\[\]]*)(?::(?P<port>[0-9]*))?")


def _integer(text: JSONValue) -> bool:
    """What Mangum's int() accepts."""
    try:
        int(text)
    except (TypeError, ValueError):
        return False
    return True


def _drop(event: JSONObject, names: set[str]) -> None:
    """Leave the headers ``names`` (lower-case) out of ``event``, a shallow copy."""
    for field in ("headers", "multiValueHeaders"):
        headers = event.get(field)
        if names and isinstance(headers, dict):
            event[field] = {k: v for k, v in headers.items() if str(k).lower() not in names}
