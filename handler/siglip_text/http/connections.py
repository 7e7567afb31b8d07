"""`serve`'s connections under uvicorn: the guarded HTTP protocol and the graceful server.

The guards: `guarded_protocol`; the layers: docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..engine.errors import SiglipError
from .asgi import ASGIApp, Receive, Scope, Send
from .errors import HeadersTooLargeError, InvalidFramingError, OverloadedError, error_answer

if TYPE_CHECKING:
    import socket

    import uvicorn

    from .front import Front

#: One of uvicorn's connection protocols (h11's or httptools', chosen as the server starts):
#: they share no typed base that names what is read here (``cycle``, ``transport``).
Connection = Any

logger = logging.getLogger("siglip_text.serve")

#: The most a request's line and headers may take, under either parser: past it, a 431 and
#: the connection is closed.
MAX_HEADER_BYTES = 64 * 1024
#: File descriptors the process needs beside its connections (ONNX Runtime, logs, the
#: listening socket, a Secrets Manager connection).
RESERVED_DESCRIPTORS = 64

#: uvicorn's HTTP/1.1 parsers: ``auto`` is httptools when it is installed, else h11.
Parser = Literal["auto", "h11", "httptools"]


def descriptors_for(connections: int) -> int:
    """Raise this process's open-file limit (its soft limit, up to the hard one) so that
    ``connections`` fit beside `RESERVED_DESCRIPTORS`; the connections that fit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):  # past the kernel's own bound (fs.nr_open)
            pass
    if soft == resource.RLIM_INFINITY:
        return connections
    return max(1, min(connections, soft - RESERVED_DESCRIPTORS))


def guarded_protocol(
    *, header_timeout: float, max_connections: int, parser: Parser = "auto"
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``parser``: ``auto`` is httptools when installed, else h11),
    guarded.

    uvicorn arms no timer before a connection's first request and counts idle connections against
    its concurrency limit, so this protocol is guarded:

    - a connection must complete its request headers within ``SIGLIP_HEADER_TIMEOUT_SECONDS`` of
      opening (and of its previous answer), else it is closed: a socket that sends nothing, or a
      header line now and then, cannot stay;
    - a request's line and headers over `MAX_HEADER_BYTES` get a 431, counted on the bytes before
      either parser sees them (h11 alone refuses an unfinished head past 16 KiB and lets a larger
      one through when it arrives whole; llhttp, under httptools, has no bound);
    - a request the parser refuses gets a 400 in OpenAI's shape (uvicorn answers plain text), and
      one whose framing RFC 9112 calls ambiguous or faulty (`framing_refusal`: Content-Length with
      Transfer-Encoding, and what else one parser lets through and the other refuses) a 400
      before the app sees it; either way the connection is closed after that one answer;
    - at most ``SIGLIP_MAX_CONNECTIONS`` are open; at the cap a new connection closes the one
      idle longest (no request in progress) to make room, and only when every connection has a
      request in progress is the newcomer answered 429 (``Retry-After``); idle connections never
      count against admission, which counts requests (`http.admission`).

    The server (`server_class`) is uvicorn's, with the front layer's shutdown grace period.
    """
    base = _parser_protocol(parser)
    refusal = error_answer(
        OverloadedError(
            "the server has as many connections open as it accepts, each with a request in "
            "progress; retry after the delay in the Retry-After header"
        )
    )
    refused = _raw_answer(refusal.status, refusal.headers, refusal.body)
    too_large = _raw_answer(**_answer(head_too_large()))
    unparsable = _raw_answer(**_answer(unparsable_request()))
    cap = max_connections

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        """One connection: closed when its request headers take too long or pass the bound;
        its framing checked before the app sees a request; at the cap, the idlest connection
        makes room for it."""

        def __init__(self, config: uvicorn.Config, *args: object, **kwargs: object) -> None:
            # h11 refuses, as plain text, an unfinished head past its own bound (16 KiB by
            # default), and only then: the bound is this module's, the same for both parsers.
            config.h11_max_incomplete_event_size = MAX_HEADER_BYTES
            super().__init__(config, *args, **kwargs)
            self.app = _framing_guard(self.app)  # type: ignore[has-type]
            self._header_timer: asyncio.TimerHandle | None = None
            self._header_bytes = 0
            self._tail = b""  # the last bytes of the head so far: its end may straddle reads
            self._idle_since = 0.0
            self._after_answer: bytes | None = None  # a refusal of the next request

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._await_headers()
            if len(self.connections) > cap and not _make_room(self.connections, self):
                logger.warning("connection refused: %d open, each with a request", cap)
                transport.write(refused)
                transport.close()

        def data_received(self, data: bytes) -> None:
            if self._closing():
                # After an answer that closes the connection nothing more is read as a
                # request (RFC 9112 section 9.6): the bytes are dropped, unanswered.
                return
            # Bytes count toward the next head while it is awaited, and also while a request
            # whose body is all read runs: under httptools they are the pipelined next
            # request's, which llhttp would otherwise take in without bound.
            counting = self._header_timer is not None or _between_requests(self)
            if counting and not self._header_bytes:
                # Empty lines before a request line are ignored (RFC 9112 section 2.2), as
                # llhttp does; h11 refuses them.
                data = data.lstrip(b"\r\n")
                if not data:
                    return
            # The bound is checked before the parser sees the bytes: h11 would refuse first,
            # and a head that completes within one read would otherwise pass unmeasured.
            if counting and self._head_too_large(data):
                self._refuse_head()
                return
            before = self.cycle
            super().data_received(data)
            if self.cycle is not before:  # a request's headers are complete
                self._stop_waiting()
                self._header_bytes, self._tail = 0, b""
            elif counting:
                self._header_bytes += len(data)
                self._tail = (self._tail + data)[-3:]
            if _chunk_past_64_bits(self, len(data)):
                self.send_400_response("a chunk size past 64 bits")

        def _refuse_head(self) -> None:
            """A head past the bound: a 431 now if no answer is under way, else once it is
            sent; nothing more is read meanwhile."""
            if self.transport.is_closing():
                return
            if _idle(self):
                self.transport.write(too_large)
                self.transport.close()
            else:
                self._answer_after(too_large)

        def _answer_after(self, refusal: bytes) -> None:
            """Refuse the next request once the answer under way is sent (answers go out in
            order), reading nothing more meanwhile."""
            self._after_answer = refusal
            self.transport.pause_reading()

        def _closing(self) -> bool:
            """The request in progress is all read and it, or its answer, closes the
            connection (``Connection: close``, HTTP/1.0): what follows is no request."""
            cycle = self.cycle
            if cycle is None or cycle.more_body:
                return False
            conn = getattr(self, "conn", None)  # h11's state machine; httptools has none
            if conn is not None:
                import h11

                closed = (h11.MUST_CLOSE, h11.CLOSED)
                return conn.their_state in closed or conn.our_state in closed
            return not cycle.keep_alive

        if hasattr(base, "on_headers_complete"):  # httptools: the target as received

            def on_headers_complete(self) -> None:
                target = self.url
                super().on_headers_complete()
                # llhttp's path drops an absolute-form target's authority, which RFC 9112
                # section 3.2.2 puts in Host's place: keep the target as h11 does.
                if _absolute_form(target) and isinstance(self.scope, dict):
                    self.scope["raw_path"] = target.partition(b"?")[0]
                if b"#" in target and isinstance(self.scope, dict):  # llhttp drops it too
                    self.scope["raw_path"] = target

        def _head_too_large(self, data: bytes) -> bool:
            """Whether the head being received, with ``data``, passes `MAX_HEADER_BYTES`."""
            end = (self._tail + data).find(b"\r\n\r\n")
            received = len(data) if end < 0 else end + 4 - len(self._tail)
            return self._header_bytes + received > MAX_HEADER_BYTES

        def send_400_response(self, msg: str) -> None:
            """A request the parser refuses: OpenAI's shape instead of uvicorn's plain text,
            and the connection closed (where the parser stopped, the stream has no framing)."""
            if self.transport.is_closing():
                return
            if self._closing():
                # Bytes after a close are no request: nothing to answer, and the answer under
                # way (which closes the connection) is not cut.
                if self.cycle.response_complete:
                    self.transport.close()
                else:
                    self.transport.pause_reading()
                return
            if _between_requests(self):
                # The bytes refused are the next request's (the one running is all read):
                # its answer first, as h11 does (it reads nothing until then).
                logger.warning("answered 400: the request is not valid HTTP/1.1")
                self._answer_after(unparsable)
                return
            # Bytes refused inside the body of a request already answered (or being answered)
            # are that request's: a second answer to it would only confuse; the close says it.
            cycle = self.cycle
            if not (cycle is not None and cycle.more_body and cycle.response_started):
                logger.warning("answered 400: the request is not valid HTTP/1.1")
                self.transport.write(unparsable)
            self.transport.close()

        def on_response_complete(self) -> None:
            if self._after_answer is not None and not self.transport.is_closing():
                self.transport.write(self._after_answer)  # the next request's refusal
                self.transport.close()
            super().on_response_complete()
            if not self.transport.is_closing() and _idle(self):
                self._await_headers()  # the next request on this connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            # The count is not reset: bytes of the next head that came while the answer
            # was under way are in it already (it restarts when a head completes).
            self._stop_waiting()
            self._idle_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _stop_waiting(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if _idle(self) and not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol


def head_too_large() -> HeadersTooLargeError:
    """The 431 of a request whose line and headers pass `MAX_HEADER_BYTES`."""
    return HeadersTooLargeError(
        f"the request's line and headers are larger than {MAX_HEADER_BYTES} bytes"
    )


def unparsable_request() -> InvalidFramingError:
    """The 400 of a request the HTTP parser refuses."""
    return InvalidFramingError(
        "the request is not valid HTTP/1.1: its request line, a header or its body's framing "
        "cannot be parsed (RFC 9112; e.g. a Content-Length that is not digits, two differing "
        "Content-Length headers, Content-Length with Transfer-Encoding, a bad chunk size)"
    )


ONE_LENGTH = (
    "send the body's length one way: one Content-Length, or Transfer-Encoding: chunked alone"
)


def framing_refusal(scope: Scope) -> SiglipError | None:
    """Why a request must be refused from its head alone, whichever parser read it (None when
    it need not be): what either of uvicorn's parsers lets through and RFC 9112 refuses.

    - a head past `MAX_HEADER_BYTES` (431);
    - an HTTP version other than 1.0 and 1.1, a target that is no path (``*``,
      ``v1/embeddings``) or has a fragment (sections 2.3, 3.2: what h11 passes on and
      llhttp refuses);
    - no ``Host`` in HTTP/1.1, or more than one (section 3.2: 400);
    - ``Transfer-Encoding`` with ``Content-Length``, or in HTTP/1.0, or other than ``chunked``
      alone (section 6.1: the framing is ambiguous or unknown; the connection must close);
    - ``Content-Length`` more than once (section 6.3: the framing is not one number).

    Every refusal here closes the connection: the bytes after the head cannot be trusted to
    start the next request.
    """
    if head_size(scope) > MAX_HEADER_BYTES:
        return head_too_large()
    if scope["http_version"] not in ("1.0", "1.1"):
        return InvalidFramingError(
            f"HTTP/{scope['http_version']} is not served here: send HTTP/1.1 (RFC 9112 "
            "section 2.3; llhttp refuses any other version, h11 reads 1.x as 1.1)"
        )
    target = scope["raw_path"]
    if not target.startswith(b"/") or b"#" in target or b"#" in scope["query_string"]:
        return InvalidFramingError(
            "the request target is not a path: it starts with '/' and has no fragment "
            "(RFC 9112 section 3.2; or an absolute URI, http://host/path)"
        )
    values: dict[bytes, list[bytes]] = {}
    for name, value in scope["headers"]:
        values.setdefault(name, []).append(value)
    hosts = values.get(b"host", [])
    if len(hosts) > 1 or (not hosts and scope["http_version"] == "1.1"):
        return InvalidFramingError(
            f"an HTTP/1.1 request has exactly one Host header; this one has {len(hosts)} "
            "(RFC 9112 section 3.2)",
            param="Host",
        )
    codings = values.get(b"transfer-encoding", [])
    lengths = values.get(b"content-length", [])
    if codings and lengths:
        return InvalidFramingError(
            "Content-Length with Transfer-Encoding: the body's length is ambiguous "
            f"(RFC 9112 section 6.1); {ONE_LENGTH}",
            param="Transfer-Encoding",
        )
    if codings and scope["http_version"] == "1.0":
        return InvalidFramingError(
            "Transfer-Encoding in an HTTP/1.0 request: its framing is faulty (RFC 9112 "
            "section 6.1); send HTTP/1.1, or a Content-Length",
            param="Transfer-Encoding",
        )
    if codings and b",".join(codings).strip().lower() != b"chunked":
        return InvalidFramingError(
            "the only transfer coding accepted is Transfer-Encoding: chunked, alone",
            param="Transfer-Encoding",
        )
    if len(lengths) > 1 or any(b"," in value for value in lengths):
        return InvalidFramingError(
            f"Content-Length more than once (RFC 9112 section 6.3); {ONE_LENGTH}",
            param="Content-Length",
        )
    return None


def origin_form(scope: Scope) -> Scope:
    """A request whose target is in absolute form (``POST http://host/v1/embeddings``) as
    the same request in origin form: its path alone, and the target's authority in place of
    every ``Host`` header ("the server MUST ignore the received Host header field (if any)
    and instead use the host information of the request-target", RFC 9112 section 3.2.2),
    so that the Host guard checks the authority the client named. Both parsers keep the
    whole target in ``raw_path`` (h11 does; the protocol puts it back under httptools)."""
    from urllib.parse import unquote

    _, _, rest = scope["raw_path"].partition(b"://")
    authority, slash, path = rest.partition(b"/")
    raw_path = slash + path if slash else b"/"
    headers = [(n, v) for n, v in scope["headers"] if n != b"host"]
    root = scope.get("root_path", "")
    return {
        **scope,
        "raw_path": root.encode("ascii") + raw_path,
        "path": root + unquote(raw_path.decode("latin-1")),
        "headers": [*headers, (b"host", authority)],
    }


def head_size(scope: Scope) -> int:
    """The bytes of a request's line and headers as parsed (their whitespace normalized)."""
    target = len(scope["raw_path"]) + (
        len(scope["query_string"]) + 1 if scope["query_string"] else 0
    )
    line = len(scope["method"]) + target + len(" HTTP/1.1\r\n") + 1
    return line + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) + 2


def _framing_guard(app: ASGIApp) -> ASGIApp:
    """``app`` behind `framing_refusal`: a refused request is answered here and its connection
    closed (``Connection: close``), its body never read."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _absolute_form(scope.get("raw_path")):
            scope = origin_form(scope)
        refusal = framing_refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            await app(scope, receive, send)
            return
        answer = error_answer(refusal)
        logger.warning("answered %d: %s", answer.status, refusal.message)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer.body)).encode()),
            *((name.lower().encode(), value.encode()) for name, value in answer.headers.items()),
        ]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    return guarded


# Any: `_raw_answer`'s keyword arguments, each of its own type
def _answer(exc: SiglipError) -> dict[str, Any]:
    """`_raw_answer`'s arguments for an error, from its row in the one table."""
    answer = error_answer(exc)
    return {"status": answer.status, "headers": answer.headers, "body": answer.body}


def _parser_protocol(parser: Parser) -> type[asyncio.Protocol]:
    """uvicorn's protocol class for ``parser`` (ImportError when that parser is absent)."""
    if parser == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def _between_requests(connection: Connection) -> bool:
    """A request is all read (its body too) and its answer not yet sent: what arrives now is
    the next request's."""
    cycle = connection.cycle
    return cycle is not None and not cycle.more_body and not cycle.response_complete


def _chunk_past_64_bits(connection: Connection, read: int) -> bool:
    """Under h11, whether the chunk being read declared a size past 64 bits, which llhttp
    (httptools) refuses at once: h11 takes up to 20 hex digits and would wait for the bytes
    (``read``: the bytes just fed, some of which the chunk may have taken)."""
    reader = getattr(getattr(connection, "conn", None), "_reader", None)
    left = getattr(reader, "_bytes_in_chunk", 0)
    return isinstance(left, int) and left >= 2**64 - read


def _absolute_form(target: object) -> bool:
    """Whether a request target is in absolute form (``http://host/path``, RFC 9112
    section 3.2.2), not origin form (``/path``)."""
    return isinstance(target, bytes) and not target.startswith(b"/") and b"://" in target


def _idle(connection: Connection) -> bool:
    """No request in progress: waiting for (the rest of) its next request's headers."""
    return connection.cycle is None or bool(connection.cycle.response_complete)


def _make_room(connections: set[Connection], newcomer: Connection) -> bool:
    """Close the connection idle longest (not ``newcomer``); False when none is idle."""
    idle = [
        c for c in connections if c is not newcomer and _idle(c) and not c.transport.is_closing()
    ]
    if not idle:
        return False
    min(idle, key=lambda c: getattr(c, "_idle_since", 0.0)).transport.close()
    return True


def _raw_answer(status: int, headers: dict[str, str], body: bytes) -> bytes:
    """An HTTP/1.1 answer as bytes, for a connection that has not sent its request yet."""
    from http import HTTPStatus

    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{n.lower()}: {v}" for n, v in headers.items() if n.lower() != "connection"),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class GracefulServerClass(Protocol):
    """uvicorn's server class with the shutdown grace period (`server_class`)."""

    def __call__(
        self, config: uvicorn.Config, *, front: Front, grace_seconds: float
    ) -> uvicorn.Server: ...


def server_class() -> GracefulServerClass:
    import uvicorn

    class _GracefulServer(uvicorn.Server):
        """uvicorn's server, with the front layer's grace period on shutdown."""

        def __init__(self, config: uvicorn.Config, *, front: Front, grace_seconds: float) -> None:
            super().__init__(config)
            self.front = front
            self.grace_seconds = grace_seconds

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # uvicorn's own shutdown closes the listeners, then waits for every connection;
            # once the grace period's 503s are out, `force_exit` ends that wait (computations
            # still running are abandoned: ONNX Runtime cannot be interrupted mid-run).
            self.front.begin_shutdown(self.grace_seconds, on_expired=self._expired)
            await super().shutdown(sockets)

        def _expired(self) -> None:
            self.force_exit = True

    return _GracefulServer
