"""The front door, for Lambda and `serve` alike: the one ASGI layer in front of the app's
routes that owns the key check, the body limit and admission, so that each request is
authenticated once, its body bounded once and admitted once, whichever entry point it came
through. `app.create_app` puts it in front of the routes.

What it carries out, and in what order: `Front`; the layers: docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ..engine.errors import SiglipError
from .admission import Admission, evict_a_slow_reader
from .asgi import ASGIApp, Receive, Scope, Send, Tracked, send_error, without_body
from .body import drain, read_body, replay
from .errors import (
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    status_for,
)
from .exchange import Exchange, Stage, Upload
from .gate import LOOPBACK_HOSTS, Decision, Head, Policy, decide, shutting_down
from .shutdown import Shutdown
from .unexpected import unexpected_error

__all__ = ["LOOPBACK_HOSTS", "FailureObserver", "Front"]

logger = logging.getLogger("siglip_text.http.front")


class FailureObserver(Protocol):
    """Told about each request refused here (the app tells it about the others)."""

    def request_failed(self, *, status: int, code: str | None) -> None: ...


class Front:
    """The front layer. `around` sets the app it stands in front of (a Starlette middleware
    factory).

    It carries out, for each request, what its parts decide:

    - `gate`: what to do, from the request's head alone (host, shutdown, key, a body where none
      is taken, media type, content coding, declared length): pass, refuse, or admit;
    - `admission`: one of ``in_flight + pending`` places, taken before one byte of the body is
      read (so at most that many bodies are ever held, whatever the clients send), or a 429,
      after evicting a slow reader if there is one; then one of ``in_flight`` running slots;
    - `body`: the body read once, bounded in size and time, or dropped after a refusal;
    - `shutdown`: the grace period, and the 503 of whatever it catches;
    - `exchange`: each request's stage, one enum.

    Requests without a body (``/health``, ``/v1/models``) take no admission: they cost nothing and
    must answer while the server is saturated. A ``HEAD`` request gets its ``GET``'s status and
    headers without content. Any exception that escapes the app (or this layer) is logged,
    scrubbed, and answered with an OpenAI-shaped 500: never a plain-text one.
    """

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
        self.policy = Policy(
            routes=tuple(routes),
            body_routes=body_routes,
            max_body_bytes=max_body_bytes,
            keyed=authenticate is not None,
            json_only=json_only,
            allowed_hosts=allowed_hosts,
        )
        self.observer = observer
        # Must not block the loop for long: serve's authenticator reads the secret in a
        # thread of its own; Lambda's reads it in the request, all its environment does.
        self.authenticate = authenticate
        self.body_idle_seconds = body_idle_seconds
        self.body_total_seconds = body_total_seconds
        self.shutdown = Shutdown()
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
        answer = Tracked(send)
        try:
            await self._route(scope, receive, answer.send)
        except Exception as exc:
            error = self._unexpected(exc)
            if not answer.started:
                await send_error(answer.send, error)
            try:
                self._refused(error)
            except Exception as observer_fault:  # the fault may be the observer's own
                self._unexpected(observer_fault)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        head = Head.of(scope)
        if head.method == "HEAD":
            send = without_body(send)
        decision = decide(head, self.policy, expired=self.shutdown.expired)
        if not decision.tracked:
            if await self._refused_at_gate(Exchange(send), head, receive, decision):
                return
            await self.app(scope, receive, send)
            return
        exchange = Exchange(send)
        async with self.shutdown.tracking(exchange):
            try:
                if await self._refused_at_gate(exchange, head, receive, decision):
                    return
                await self._admit(exchange, scope, head, receive)
            finally:
                exchange.released.set()

    async def _refused_at_gate(
        self, exchange: Exchange, head: Head, receive: Receive, decision: Decision
    ) -> bool:
        """Carry out the gate's refusals (the key check first); True if it refused."""
        refusal = decision.refusal
        if decision.check_key:
            refusal = self._key_refusal(head) or refusal
        if refusal is None:
            return False
        body_left = decision.body_left or decision.admit
        await self._refuse(exchange, head, receive, refusal, body_left=body_left)
        return True

    def _key_refusal(self, head: Head) -> SiglipError | None:
        """The key's refusal (401, or 503 while none can be checked), if any; a fault in the
        check is a 500."""
        assert self.authenticate is not None
        try:
            self.authenticate(head.authorization_value)
        except SiglipError as refused:
            return refused
        except Exception as exc:
            return self._unexpected(exc)
        return None

    async def _admit(self, exchange: Exchange, scope: Scope, head: Head, receive: Receive) -> None:
        """Take an admission (evicting a slow reader if need be), or answer 429."""
        admitted = contextlib.ExitStack()
        try:
            admitted.enter_context(self.admission.admit())
        except OverloadedError as refused:
            if not await evict_a_slow_reader(self.shutdown.active):
                await self._refuse(exchange, head, receive, refused, body_left=True)
                return
            try:
                admitted.enter_context(self.admission.admit())
            except OverloadedError as still:
                await self._refuse(exchange, head, receive, still, body_left=True)
                return
        with admitted:
            await self._run(exchange, scope, head, receive)

    async def _run(self, exchange: Exchange, scope: Scope, head: Head, receive: Receive) -> None:
        """Read the body, wait for a running slot, hand both to the app."""
        assert self.app is not None
        async with contextlib.AsyncExitStack() as running:
            try:
                async with self.shutdown.window(exchange):
                    body = await self._read_evictable(exchange, receive)
                    if body is None:  # the client went away
                        return
                    exchange.stage = Stage.WAITING
                    await running.enter_async_context(self.admission.running())
            except (PayloadTooLargeError, TimeoutError) as refused:
                error = refused if isinstance(refused, SiglipError) else shutting_down()
                # Past the limit on its last message, a body has nothing left to drain:
                # waiting for more would hold the answer for the drain's idle timeout.
                upload = exchange.upload
                left = exchange.stage is not Stage.WAITING and not (upload and upload.complete)
                await self._refuse(exchange, head, receive, error, body_left=left)
                return
            except RequestTimeoutError as slow:
                # Not drained: a client this slow would hold the connection again.
                await self._refuse(exchange, head, receive, slow, body_left=False)
                return
            exchange.stage = Stage.RUNNING
            try:
                await self.app(scope, replay(body, receive), exchange.guarded())
            finally:
                # Cut while the app was finishing: return only once the 503 is out, or the
                # server would answer the request itself (a plain-text 500) first.
                if exchange.cut_answer is not None:
                    await asyncio.shield(exchange.cut_answer)

    async def _read_evictable(self, exchange: Exchange, receive: Receive) -> bytes | None:
        """The body (`body.read_body`), cut short (408) if a newcomer finds the server full
        (`admission.evict_a_slow_reader`)."""
        exchange.upload = Upload(since=asyncio.get_running_loop().time())
        exchange.stage = Stage.READING
        try:
            async with asyncio.timeout(None) as evict:
                exchange.evict = evict
                return await read_body(
                    receive,
                    max_bytes=self.policy.max_body_bytes,
                    idle_seconds=self.body_idle_seconds,
                    total_seconds=self.body_total_seconds,
                    upload=exchange.upload,
                )
        except TimeoutError:  # the eviction's (the grace period's ends as a cancellation here)
            raise RequestTimeoutError(
                "the request body was arriving too slowly while the server was full; send it "
                "at once"
            ) from None
        finally:
            exchange.evict = None

    def _unexpected(self, exc: BaseException) -> SiglipError:
        """An exception no one expected: logged, answered as a 500 (`unexpected_error`)."""
        return unexpected_error(exc, logger)

    async def _refuse(
        self,
        exchange: Exchange,
        head: Head,
        receive: Receive,
        error: SiglipError,
        *,
        body_left: bool,
    ) -> None:
        """Answer now; then, if the client is still sending its body, drop it (bounded)."""
        exchange.answer()
        drained = body_left and not head.expects_continue
        await send_error(exchange.send, error, more_body=drained)
        if drained:
            await drain(receive)
            await exchange.send({"type": "http.response.body", "body": b"", "more_body": False})
        self._refused(error)

    def _refused(self, error: SiglipError) -> None:
        if self.observer is not None:
            self.observer.request_failed(status=status_for(error)[0], code=error.code)

    # --- shutdown ---------------------------------------------------------------------------

    @property
    def expired(self) -> bool:
        """Whether the shutdown grace period has ended (every request is answered 503)."""
        return self.shutdown.expired

    def begin_shutdown(self, grace_seconds: float, on_expired: Callable[[], None]) -> None:
        """Let admitted requests run for ``grace_seconds``; then answer the rest with 503."""
        task = self.shutdown.begin(grace_seconds, on_expired, self._observe)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _observe(self, status: int, code: str | None) -> None:
        if self.observer is not None:
            self.observer.request_failed(status=status, code=code)
