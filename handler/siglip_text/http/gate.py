"""The gate: what to do with a request, decided from its head alone (method, path,
headers), before anything is admitted or read (`decide`). Pure: no I/O, no clock, no key
store; the front carries the decision out (`front.Front`; docs/architecture.md). The route
wording (404, 405) and the declared ``Content-Length`` check are here, where they are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..engine.errors import SiglipError
from . import authority
from .asgi import Scope
from .errors import (
    InvalidHeaderError,
    InvalidHostError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    RouteNotFoundError,
    ShuttingDownError,
    UnsupportedContentEncodingError,
    UnsupportedMediaTypeError,
    body_too_large,
    short,
)

#: The prefix of every OpenAI route: an OpenAI client's base URL ends with it.
API_PREFIX = "/v1"

#: The headers the gate reads (their first value), besides every ``Authorization``.
_READ = frozenset(
    {
        b"content-length",
        b"transfer-encoding",
        b"host",
        b"content-type",
        b"content-encoding",
        b"expect",
    }
)
#: The names a server bound to loopback answers to (any port).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True)
class Head:
    """What the gate reads of a request: its method, path and the headers that matter."""

    method: str
    path: str
    has_body: bool
    host: bytes | None = None
    authorization: tuple[bytes, ...] = ()
    content_type: bytes | None = None
    content_encoding: bytes | None = None
    content_length: bytes | None = None
    expects_continue: bool = False

    @classmethod
    def of(cls, scope: Scope) -> Head:
        found: dict[bytes, bytes] = {}
        authorization: list[bytes] = []
        for key, value in scope.get("headers", ()):  # one pass: this runs for every request
            name = bytes(key).lower()
            if name == b"authorization":
                authorization.append(bytes(value))
            elif name in _READ and name not in found:
                found[name] = bytes(value)
        content_length = found.get(b"content-length")
        return cls(
            method=str(scope.get("method", "")),
            path=str(scope.get("path", "")),
            # Chunked, or a declared length other than 0.
            has_body=b"transfer-encoding" in found
            or (content_length is not None and content_length.lstrip(b"0") != b""),
            host=found.get(b"host"),
            authorization=tuple(authorization),
            content_type=found.get(b"content-type"),
            content_encoding=found.get(b"content-encoding"),
            content_length=content_length,
            # The client waits for ``100 Continue`` before it sends the body: nothing to drain.
            expects_continue=found.get(b"expect", b"").lower() == b"100-continue",
        )

    @property
    def authorization_value(self) -> str | None:
        """The one ``Authorization`` value, as the authenticator takes it."""
        return self.authorization[0].decode("latin-1") if self.authorization else None


@dataclass(frozen=True)
class Policy:
    """What the gate checks: the routes, which take a body, and the optional checks."""

    routes: Sequence[tuple[str, str]]
    body_routes: frozenset[tuple[str, str]]
    max_body_bytes: int
    keyed: bool = False  # an authenticator checks the key
    json_only: bool = False
    allowed_hosts: frozenset[str] | None = None


@dataclass(frozen=True)
class Decision:
    """What the front does with a request, in order: check the key (``check_key``), then
    refuse (``refusal``: answered now, with ``body_left`` drained after the answer), else
    admit it and read its body (``admit``), else hand it to the app as it is."""

    check_key: bool = False
    refusal: SiglipError | None = None
    body_left: bool = False
    admit: bool = False

    @property
    def tracked(self) -> bool:
        """The shutdown waits for it: it holds, or may hold, a body."""
        return self.admit or self.body_left


def decide(head: Head, policy: Policy, *, expired: bool) -> Decision:
    """The decision for a request.

    In order:

    1. when configured (`serve` bound to loopback), a ``Host`` that is not a loopback name is a
       400 (a web page that rebinds its DNS name to 127.0.0.1 cannot read the answers);
    2. once the shutdown grace period has ended, every request is a 503 (its body drained);
    3. the key is checked for the routes under ``/v1`` and for any request that carries a body,
       whatever its route, before anything is admitted or read: a client without a key never
       holds a place. An ``Authorization`` header sent twice (or joined with a comma by a proxy:
       Mangum joins API Gateway's multi-value headers so) is a 400 naming it, on every entry
       point: RFC 9110 section 5.3 makes it no list, and which copy counts would otherwise
       depend on the server;
    4. a body (a ``Content-Length`` above 0, or ``Transfer-Encoding``) on a route that takes none
       is refused unread: 404 for a path that is no route, 405 for another method, 413 for a
       route that takes no body;
    5. for a route that takes a body: when configured (`serve`), a body not declared
       ``Content-Type: application/json`` is a 415 (a web page can POST ``text/plain`` anywhere
       without a CORS preflight); a ``Content-Encoding`` other than ``identity`` is a 415 (RFC
       9110 section 15.5.16: bodies are read as sent); a declared length over the limit is a 413;
       else it is admitted (`Decision.admit`).
    """
    method, path = head.method, head.path
    if policy.allowed_hosts is not None and not host_allowed(head.host, policy.allowed_hosts):
        refusal: SiglipError = InvalidHostError(
            "the Host header names another server: this one, bound to loopback, answers "
            "to localhost, 127.0.0.1 and [::1] only"
        )
        return Decision(refusal=refusal, body_left=head.has_body)
    takes_body = (method, path) in policy.body_routes
    if not (expired or head.has_body or takes_body):
        if not (policy.keyed and served_under_api(method, path, policy.routes)):
            return Decision()
        doubled = doubled_authorization(head)
        return Decision(refusal=doubled) if doubled else Decision(check_key=True)
    if expired:
        return Decision(refusal=shutting_down(), body_left=True)
    if policy.keyed:
        doubled = doubled_authorization(head)
        if doubled is not None:
            return Decision(refusal=doubled, body_left=True)
    after_key = body_refusal(head, policy, takes_body=takes_body)
    if after_key is not None:
        return Decision(check_key=policy.keyed, refusal=after_key, body_left=True)
    return Decision(check_key=policy.keyed, admit=True)


def body_refusal(head: Head, policy: Policy, *, takes_body: bool) -> SiglipError | None:
    """The refusal of a request with a body before it is read, if any (steps 4 and 5)."""
    if not takes_body:
        return no_body_here(head.method, head.path, policy.routes)
    if policy.json_only:
        media_type = (head.content_type or b"").split(b";")[0].strip().lower()
        if media_type != b"application/json":
            return UnsupportedMediaTypeError(
                "the request body must be JSON, sent with 'Content-Type: application/json'"
            )
    coding = (head.content_encoding or b"identity").strip().lower()
    if coding not in (b"identity", b""):
        return UnsupportedContentEncodingError(
            f"the request body is sent with 'Content-Encoding: "
            f"{short(coding.decode('latin-1'), 40)}'; this server reads bodies as sent "
            "(identity) only: send it uncompressed"
        )
    if declares_more_than(head.content_length, policy.max_body_bytes):
        return body_too_large(policy.max_body_bytes)
    return None


def served_under_api(method: str, path: str, routes: Sequence[tuple[str, str]]) -> bool:
    """A route of the API (``/v1``), asked with one of its methods (HEAD for GET): the key is
    needed; any other request without a body meets the app's 404 or 405."""
    asked = "GET" if method == "HEAD" else method
    return path.startswith(API_PREFIX + "/") and (asked, path) in routes


def no_body_here(method: str, path: str, routes: Sequence[tuple[str, str]]) -> SiglipError:
    """The answer to a body sent to a route that takes none (its body is never read)."""
    if (method, path) in routes:
        return PayloadTooLargeError(
            f"{method} {short(path, 100)} takes no request body; send it without one"
        )
    allowed = [m for m, p in routes if p == path]
    if allowed:
        return method_not_allowed(method, path, allowed)
    return route_not_found(method, path, routes)


def doubled_authorization(head: Head) -> InvalidHeaderError | None:
    """The 400 of an ``Authorization`` sent more than once: two headers, or one value holding
    a comma (a proxy's join of two; a bearer token never holds one, RFC 6750 section 2.1)."""
    if len(head.authorization) <= 1 and b"," not in b"".join(head.authorization):
        return None
    return InvalidHeaderError(
        "the Authorization header is sent more than once; send it once, with one key "
        "('Authorization: Bearer <key>')",
        param="Authorization",
    )


def host_allowed(host: bytes | None, allowed: frozenset[str]) -> bool:
    """Whether the ``Host`` header names one of ``allowed`` (any port), read as an RFC 3986
    authority (`authority.host_allowed`); none sent is allowed."""
    return authority.host_allowed(host, allowed)


def shutting_down() -> ShuttingDownError:
    """The 503 of a request the end of the shutdown grace period caught."""
    return ShuttingDownError(
        "the server is shutting down and its grace period ended before this request could "
        "be served; retry it"
    )


def route_not_found(method: str, path: str, routes: Sequence[tuple[str, str]]) -> SiglipError:
    """The 404 of a path that is no route: the routes there are, and, for a route's path
    without ``/v1`` (a client whose base URL lacks it), the base URL to use."""
    asked = f"{short(method, 20)} {short(path, 100)}"
    if (method, API_PREFIX + path) in routes:
        return RouteNotFoundError(
            f"Invalid URL ({asked}): this API's routes start with {API_PREFIX}; use "
            f"{method} {API_PREFIX}{path}, i.e. a base URL that ends in {API_PREFIX} "
            f"(OpenAI clients: base_url='http://<host>:<port>{API_PREFIX}')"
        )
    listed = ", ".join(f"{m} {p}" for m, p in routes if m != "HEAD")
    return RouteNotFoundError(f"Invalid URL ({asked}); the routes are {listed}")


def method_not_allowed(method: str, path: str, allowed: Sequence[str]) -> MethodNotAllowedError:
    """The 405 of a route's path asked with another method (``Allow`` lists the right ones)."""
    return MethodNotAllowedError(
        f"Method {short(method, 20)} is not allowed for {short(path, 100)}",
        allow=", ".join(allowed),
    )


def declares_more_than(content_length: str | bytes | None, limit: int) -> bool:
    """Whether a ``Content-Length`` value declares more than ``limit`` bytes.

    Only plain ASCII digits count (``str.isdigit`` also accepts '²', which int() refuses);
    anything else is left to the streamed count, which is the check that counts. Never
    int() of thousands of digits (int() refuses more than 4300).
    """
    if content_length is None:
        return False
    text = content_length.decode("latin-1") if isinstance(content_length, bytes) else content_length
    if not (text.isascii() and text.isdigit()):
        return False
    digits = text.lstrip("0")
    return len(digits) > len(str(limit)) or (digits != "" and int(digits) > limit)
