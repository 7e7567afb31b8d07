"""The front door, for Lambda and `serve` alike: the one ASGI layer in front of the app's
routes that owns the key check, the body limit and admission, so that each request is
authenticated once, its body bounded once and admitted once, whichever entry point it came
through. `app.create_app` puts it in front of the routes.

For every request:

1. when configured (`serve` bound to loopback), a ``Host`` that is not a loopback name is a
   400 (a web page that rebinds its DNS name to 127.0.0.1 cannot read the answers);
2. the ``Authorization`` header is checked (401, or 503 while no key can be checked) for the
   routes under ``/v1`` and for any request that carries a body, whatever its route, before
   anything is admitted or read: a client without a key never holds a place;
3. a body (a ``Content-Length`` above 0, or ``Transfer-Encoding``) on a route that takes
   none is refused unread: 404 for a path that is no route, 405 for another method, 413 for
   a route that takes no body.

For a route that takes a body (``POST /v1/embeddings``):

4. when configured (`serve`), a body that is not ``Content-Type: application/json`` is a 415
   (a web page can POST ``text/plain`` anywhere without a CORS preflight);
5. a declared length over the limit is a 413 at once;
6. it takes one of ``in_flight + pending`` admissions, or gets its 429, before one byte of
   its body is read, so at most that many bodies are ever held, whatever the clients send;
7. it reads the body, counting (a streamed body over the limit is a 413), within an idle
   and a total timeout (408: a client that trickles its body gives its admission back), then
   waits for one of ``in_flight`` running slots and hands the body to the app, which parses
   and serves it within that slot.

Requests without a body (``/health``, ``/v1/models``) take no admission: they cost nothing and
must answer while the server is saturated. Any exception that escapes the app (or this layer)
is logged, scrubbed, and answered with an OpenAI-shaped 500: never a plain-text one.

An answer given before the body is read (401, 404, 405, 413, 429, 503) is written first, then
the rest of the body is read and dropped, up to `DRAIN_MAX_BYTES` and `DRAIN_MAX_SECONDS`,
before the connection is closed: closing a socket with unread data makes the kernel send a
reset, which destroys the answer at clients that send their whole body before they read
(Python's ``urllib``, ``requests``). nginx's "lingering close" does the same.

On shutdown (`begin_shutdown`, called when `serve`'s uvicorn stops accepting), running and
waiting requests go on for the grace period; when it ends, every request not yet answered
gets a 503 (``server_shutting_down``, ``Connection: close``, ``Retry-After``), and
``on_expired`` is called once those answers are out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..engine.errors import (
    InvalidHostError,
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ShuttingDownError,
    SiglipError,
    UnsupportedMediaTypeError,
)
from .admission import Admission
from .errors import (
    API_PREFIX,
    body_too_large,
    declares_more_than,
    error_answer,
    method_not_allowed,
    route_not_found,
    short,
    status_for,
    unexpected,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The most of a refused body read and dropped, and for how long (then the connection is
#: closed, and a client still sending gets a reset). nginx lingers up to 30 s.
DRAIN_MAX_BYTES = 64 * 1024 * 1024
DRAIN_MAX_SECONDS = 10.0
#: A client that sends nothing for this long has stopped sending (``Expect: 100-continue``).
DRAIN_IDLE_SECONDS = 2.0

#: When admission is full, a body that has been arriving for this long, at less than this
#: rate, is cut (408) to make room for the newcomer: a client trickling its body.
SLOW_READER_SECONDS = 1.0
SLOW_READER_BYTES_PER_SECOND = 16 * 1024
#: The names a server bound to loopback answers to (any port).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})

logger = logging.getLogger("siglip_text.http.front")


class FailureObserver(Protocol):
    """Told about each request refused here (the app tells it about the others)."""

    def request_failed(self, *, status: int, code: str | None) -> None: ...


@dataclass(eq=False)
class _Exchange:
    """One request with a body, from its arrival until its answer is out."""

    send: Send
    in_app: bool = False  # the app has the body and a running slot
    started: bool = False  # a response has started
    cut_answer: asyncio.Task[None] | None = None  # the 503 of the end of the grace period
    window: asyncio.Timeout | None = None  # the shutdown deadline, while reading or waiting
    reading_since: float | None = None  # loop time its body read began, while it lasts
    received: int = 0  # bytes of its body read so far
    body_complete: bool = False  # its last body message has arrived (nothing left to drain)
    evict: asyncio.Timeout | None = None  # cuts the body read short (`_evict_a_slow_reader`)
    released: asyncio.Event = field(default_factory=asyncio.Event)  # its admission is back

    @property
    def cut(self) -> bool:
        """Answered here with a 503 when the grace period ended."""
        return self.cut_answer is not None


class Front:
    """The front layer; see the module docstring. `around` sets the app it stands in front of
    (a Starlette middleware factory)."""

    def __init__(
        self,
        *,
        admission: Admission,
        max_body_bytes: int,
        routes: Sequence[tuple[str, str]],
        body_routes: frozenset[tuple[str, str]],
        authenticate: Callable[[str | None], None] | None = None,
        observer: FailureObserver | None = None,
        body_idle_seconds: float = 10.0,
        body_total_seconds: float = 60.0,
        json_only: bool = False,
        allowed_hosts: frozenset[str] | None = None,
    ) -> None:
        self.app: ASGIApp | None = None
        self.admission = admission
        self.max_body_bytes = max_body_bytes
        self.routes = tuple(routes)
        self.body_routes = body_routes
        self.observer = observer
        # Must not block the loop for long: serve's authenticator reads the secret in a
        # thread of its own; Lambda's reads it in the request, all its environment does.
        self.authenticate = authenticate
        self.body_idle_seconds = body_idle_seconds
        self.body_total_seconds = body_total_seconds
        self.json_only = json_only
        self.allowed_hosts = allowed_hosts
        self._active: set[_Exchange] = set()
        self._deadline: float | None = None
        self._expired = False
        self._tasks: set[asyncio.Task[None]] = set()

    def around(self, app: ASGIApp) -> ASGIApp:
        """Stand in front of ``app``; return this layer."""
        self.app = app
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "Front.around(app) first"
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = _Tracked(send)
        try:
            await self._route(scope, receive, answer.send)
        except Exception as exc:
            error = self._unexpected(exc)
            if not answer.started:
                await _send_error(answer.send, error)
            if self.observer is not None:
                try:
                    self.observer.request_failed(status=status_for(error)[0], code=error.code)
                except Exception as observer_fault:  # the fault may be the observer's own
                    self._unexpected(observer_fault)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        method, path = str(scope.get("method", "")), str(scope.get("path", ""))
        has_body = _has_body(scope)
        if self.allowed_hosts is not None and not _host_allowed(scope, self.allowed_hosts):
            error = InvalidHostError(
                "the Host header names another server: this one, bound to loopback, answers "
                "to localhost, 127.0.0.1 and [::1] only"
            )
            await self._refuse(_Exchange(send), scope, receive, error, body_left=has_body)
            return
        takes_body = (method, path) in self.body_routes
        if not (self._expired or has_body or takes_body):
            if self._served_under_api(method, path):
                try:
                    self._check_key(scope)
                except SiglipError as refused:
                    await self._refuse(_Exchange(send), scope, receive, refused, body_left=False)
                    return
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(send)
        self._active.add(exchange)
        try:
            await self._serve(exchange, scope, receive, method, path, takes_body=takes_body)
        finally:
            self._active.discard(exchange)

    async def _serve(
        self,
        exchange: _Exchange,
        scope: Scope,
        receive: Receive,
        method: str,
        path: str,
        *,
        takes_body: bool,
    ) -> None:
        if self._expired:
            await self._refuse(exchange, scope, receive, _shutting_down(), body_left=True)
            return
        try:
            self._check_key(scope)
            if not takes_body:
                raise self._no_body_here(method, path)
            if self.json_only:
                _check_json(scope)
            if declares_more_than(_header(scope, b"content-length"), self.max_body_bytes):
                raise self._too_large()
        except SiglipError as refused:
            await self._refuse(exchange, scope, receive, refused, body_left=True)
            return
        admitted = contextlib.ExitStack()
        try:
            admitted.enter_context(self.admission.admit())
        except OverloadedError as refused:
            if not await self._evict_a_slow_reader():
                await self._refuse(exchange, scope, receive, refused, body_left=True)
                return
            try:
                admitted.enter_context(self.admission.admit())
            except OverloadedError as still:
                await self._refuse(exchange, scope, receive, still, body_left=True)
                return
        try:
            await self._admitted(exchange, scope, receive, admitted)
        finally:
            exchange.released.set()

    def _served_under_api(self, method: str, path: str) -> bool:
        """A route of the API (``/v1``), asked with one of its methods (HEAD for GET): the
        key is needed; any other request without a body meets the app's 404 or 405."""
        asked = "GET" if method == "HEAD" else method
        return path.startswith(API_PREFIX + "/") and (asked, path) in self.routes

    def _check_key(self, scope: Scope) -> None:
        """The key (401, or 503 while none can be checked); a fault in the check is a 500."""
        if self.authenticate is None:
            return
        authorization = _header(scope, b"authorization")
        try:
            self.authenticate(authorization.decode("latin-1") if authorization else None)
        except SiglipError:
            raise
        except Exception as exc:
            raise self._unexpected(exc) from exc

    def _no_body_here(self, method: str, path: str) -> SiglipError:
        """The answer to a body sent to a route that takes none (its body is never read)."""
        if (method, path) in self.routes:
            return PayloadTooLargeError(
                f"{method} {short(path, 100)} takes no request body; send it without one"
            )
        allowed = [m for m, p in self.routes if p == path]
        if allowed:
            return method_not_allowed(method, path, allowed)
        return route_not_found(method, path, self.routes)

    def _unexpected(self, exc: BaseException) -> SiglipError:
        """An exception no one expected: logged for the operator (type, place, scrubbed
        message; no query text), answered as a 500 that says nothing of it."""
        cause = unexpected(exc)
        logger.error("answered 500: unexpected error: %s", cause, extra={"cause": cause})
        return SiglipError(f"unexpected error: {cause}")

    async def _admitted(
        self, exchange: _Exchange, scope: Scope, receive: Receive, admitted: contextlib.ExitStack
    ) -> None:
        with admitted:
            async with contextlib.AsyncExitStack() as running:
                body_left = True
                try:
                    async with asyncio.timeout_at(self._deadline) as window:
                        exchange.window = window
                        body = await self._read_evictable(exchange, receive)
                        body_left = False
                        if body is None:  # the client went away
                            return
                        await running.enter_async_context(self.admission.running())
                except (PayloadTooLargeError, TimeoutError) as refused:
                    error = refused if isinstance(refused, SiglipError) else _shutting_down()
                    # Past the limit on its last message, a body has nothing left to drain:
                    # waiting for more would hold the answer for the drain's idle timeout.
                    left = body_left and not exchange.body_complete
                    await self._refuse(exchange, scope, receive, error, body_left=left)
                    return
                except RequestTimeoutError as slow:
                    # Not drained: a client this slow would hold the connection again.
                    await self._refuse(exchange, scope, receive, slow, body_left=False)
                    return
                finally:
                    exchange.window = None
                exchange.in_app = True
                try:
                    assert self.app is not None
                    await self.app(scope, _replay(body, receive), self._guarded_send(exchange))
                finally:
                    # Cut while the app was finishing: return only once the 503 is out, or
                    # the server would answer the request itself (a plain-text 500) first.
                    if exchange.cut_answer is not None:
                        await asyncio.shield(exchange.cut_answer)

    async def _read_evictable(self, exchange: _Exchange, receive: Receive) -> bytes | None:
        """`_read_body`, cut short (408) if a newcomer finds the server full (`_evict...`)."""
        exchange.reading_since = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(None) as evict:
                exchange.evict = evict
                return await self._read_body(receive, exchange)
        except TimeoutError:
            raise RequestTimeoutError(
                "the request body was arriving too slowly while the server was full; send it "
                "at once"
            ) from None
        finally:
            exchange.reading_since = exchange.evict = None

    async def _evict_a_slow_reader(self) -> bool:
        """Admission is full: cut the upload that has been arriving longest, if it has for
        `SLOW_READER_SECONDS`, and wait for its place. Clients that trickle their bodies
        thus never keep a prompt one out (an ordinary body arrives in milliseconds)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        readers = [
            ex
            for ex in self._active
            if ex.evict is not None
            and ex.reading_since is not None
            and now - ex.reading_since >= SLOW_READER_SECONDS
            and ex.received < SLOW_READER_BYTES_PER_SECOND * (now - ex.reading_since)
        ]
        if not readers:
            return False
        victim = min(readers, key=lambda ex: ex.reading_since or now)
        assert victim.evict is not None
        victim.evict.reschedule(now)
        victim.reading_since = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(victim.released.wait(), 1.0)
        return True

    async def _read_body(self, receive: Receive, exchange: _Exchange | None = None) -> bytes | None:
        """The whole body, or None if the client disconnected; 413 once past the limit, 408
        when the client sends nothing for the idle timeout or is not done by the total one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_total_seconds
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - loop.time()
            wait = min(self.body_idle_seconds, left)
            try:
                message = await asyncio.wait_for(receive(), max(wait, 0.0))
            except TimeoutError:
                which = "sent nothing for" if wait < left else "was not complete after"
                seconds = self.body_idle_seconds if wait < left else self.body_total_seconds
                raise RequestTimeoutError(
                    f"the request body {which} {seconds:g} seconds; send it at once"
                ) from None
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if exchange is not None:
                exchange.received = size
                exchange.body_complete = not message.get("more_body", False)
            if size > self.max_body_bytes:
                raise self._too_large()
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _guarded_send(self, exchange: _Exchange) -> Send:
        async def send(message: Message) -> None:
            if exchange.cut:  # already answered 503 at the end of the grace period
                return
            if message["type"] == "http.response.start":
                exchange.started = True
            await exchange.send(message)

        return send

    async def _refuse(
        self,
        exchange: _Exchange,
        scope: Scope,
        receive: Receive,
        error: SiglipError,
        *,
        body_left: bool,
    ) -> None:
        """Answer now; then, if the client is still sending its body, drop it (bounded)."""
        exchange.started = True
        drain = body_left and not _expects_continue(scope)
        await _send_error(exchange.send, error, more_body=drain)
        if drain:
            await _drain(receive)
            await exchange.send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.observer is not None:
            self.observer.request_failed(status=status_for(error)[0], code=error.code)

    def _too_large(self) -> PayloadTooLargeError:
        return body_too_large(self.max_body_bytes)

    # --- shutdown ---------------------------------------------------------------------------

    @property
    def expired(self) -> bool:
        """Whether the shutdown grace period has ended (every request is answered 503)."""
        return self._expired

    def begin_shutdown(self, grace_seconds: float, on_expired: Callable[[], None]) -> None:
        """Let admitted requests run for ``grace_seconds``; then answer the rest with 503."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + grace_seconds
        for exchange in self._active:
            if exchange.window is not None:
                exchange.window.reschedule(self._deadline)
        logger.info(
            "shutting down: %d request(s) with a body in progress, grace period %.1f s",
            len(self._active),
            grace_seconds,
        )
        self._keep(loop.create_task(self._expire_at(self._deadline, on_expired)))

    async def _expire_at(self, deadline: float, on_expired: Callable[[], None]) -> None:
        await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))
        self._expired = True
        cut = [ex for ex in self._active if ex.in_app and not ex.started]
        for exchange in cut:
            # The body is read already: no drain; the computation is abandoned.
            exchange.started = True
            error = _shutting_down()
            exchange.cut_answer = asyncio.create_task(_send_error(exchange.send, error))
            self._keep(exchange.cut_answer)
            if self.observer is not None:
                self.observer.request_failed(status=status_for(error)[0], code=error.code)
        if cut:
            logger.warning("grace period over: %d running request(s) answered 503", len(cut))
        # Those still reading or waiting get their 503 from their own window (and drain).
        loop = asyncio.get_running_loop()
        give_up = loop.time() + DRAIN_MAX_SECONDS + DRAIN_IDLE_SECONDS
        while (self._tasks - {asyncio.current_task()}) or any(not ex.cut for ex in self._active):
            if loop.time() > give_up:
                break
            await asyncio.sleep(0.02)
        on_expired()

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _Tracked:
    """A send that remembers whether a response has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def _check_json(scope: Scope) -> None:
    """415 unless the body is declared JSON."""
    media_type = (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
    if media_type != b"application/json":
        raise UnsupportedMediaTypeError(
            "the request body must be JSON, sent with 'Content-Type: application/json'"
        )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body already read, then the connection's events."""
    pending: list[bytes] = [body]

    async def replayed() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replayed


async def _send_error(send: Send, error: SiglipError, *, more_body: bool = False) -> None:
    """The OpenAI-shaped error, ``Connection: close``; ``more_body`` leaves it open to drain."""
    answer = error_answer(error)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer.body)).encode()),
        (b"connection", b"close"),
        *(
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.items()
        ),
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body, "more_body": more_body})


async def _drain(receive: Receive) -> None:
    """Read and drop the rest of a body: up to the bounds, or until the client stops."""
    drained = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_MAX_SECONDS):
            while drained <= DRAIN_MAX_BYTES:
                message = await asyncio.wait_for(receive(), DRAIN_IDLE_SECONDS)
                if message["type"] != "http.request":
                    return
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return


def _shutting_down() -> ShuttingDownError:
    return ShuttingDownError(
        "the server is shutting down and its grace period ended before this request could "
        "be served; retry it"
    )


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def _has_body(scope: Scope) -> bool:
    """Whether the request carries a body: chunked, or a declared length other than 0."""
    if _header(scope, b"transfer-encoding") is not None:
        return True
    value = _header(scope, b"content-length")
    return value is not None and value.lstrip(b"0") != b""


def _host_allowed(scope: Scope, allowed: frozenset[str]) -> bool:
    """Whether the ``Host`` header names one of ``allowed`` (any port); none sent is allowed."""
    host = _header(scope, b"host")
    if host is None:
        return True
    name = host.decode("latin-1").strip().lower()
    bracketed = name.startswith("[")  # an IPv6 literal, its port after the bracket
    name = name[: name.find("]") + 1] if bracketed else name.rsplit(":", 1)[0]
    return name in allowed


def _expects_continue(scope: Scope) -> bool:
    """The client waits for ``100 Continue`` before it sends the body: nothing to drain."""
    return (_header(scope, b"expect") or b"").lower() == b"100-continue"
