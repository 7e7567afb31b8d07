"""API keys (auth mode ``api-key``): ``Authorization: Bearer <key>``, keys in Secrets Manager
or, for `serve` only, in a key file (`KeyFileAuthenticator`, ``SIGLIP_API_KEY_FILE``).

The schedule of the reads, where they run, SnapStart and the comparison:
`ApiKeyAuthenticator`; the layers: docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.errors import ConfigError
from ..settings import ENV_PREFIX, Settings
from .errors import AuthenticationError, KeysUnavailableError
from .key_file import KeyFileError, KeyFileExposed, Signature, read_key_file, signature
from .key_secret import (
    CONNECT_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    default_provider,
    describe,
    read_keys,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

logger = logging.getLogger("siglip_text.http.auth")

MISSING_KEY_MESSAGE = (
    "You didn't provide an API key. Send it in the header 'Authorization: Bearer <key>'."
)
WRONG_KEY_MESSAGE = "Incorrect API key provided."
#: How long before the keys held go stale a read starts at the latest: the longest one read
#: takes, so that while Secrets Manager answers the keys never go stale.
REFRESH_LEAD_SECONDS = CONNECT_TIMEOUT_SECONDS + READ_TIMEOUT_SECONDS
#: While a read runs, `ApiKeyAuthenticator.keep_fresh` looks again this often.
KEEP_FRESH_POLL_SECONDS = 0.5
#: After a failed read of the secret the next attempt waits this long, doubling with each
#: consecutive failure up to `RETRY_MAX_SECONDS` (and never past the cache period).
RETRY_BASE_SECONDS = 5
RETRY_MAX_SECONDS = 60


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header; AuthenticationError otherwise."""
    if not authorization:
        raise AuthenticationError(MISSING_KEY_MESSAGE)
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise AuthenticationError(MISSING_KEY_MESSAGE)
    return token


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def check_bearer(authorization: str | None, digests: Iterable[bytes]) -> None:
    """The presented Bearer token against every key's digest, in constant time (no early
    exit, digests of equal length); AuthenticationError when none matches."""
    presented = _digest(bearer_token(authorization))
    valid = False
    for key in digests:
        valid |= hmac.compare_digest(presented, key)
    if not valid:
        raise AuthenticationError(WRONG_KEY_MESSAGE)


class ApiKeyAuthenticator:
    """Checks Bearer tokens against the keys of one secret, read on its own schedule.

    The secret (``SIGLIP_API_KEY_SECRET_ARN``, its forms and its one read: `key_secret`) is read
    first at init, so a missing secret or permission fails the start, then again ahead of
    expiry: once the keys held are ``SIGLIP_API_KEY_CACHE_SECONDS`` old, or `REFRESH_LEAD_SECONDS`
    (the longest one read takes) before they reach ``SIGLIP_API_KEY_MAX_STALENESS_SECONDS``,
    whichever comes first (`ApiKeyAuthenticator.refresh_age`): so a staleness limit equal to the
    cache period still leaves a read the time to end before the keys held go stale. That is one
    Secrets Manager call per execution environment per period. A failed read is one attempt
    (short timeouts, no retry), logged and counted; the next attempt waits (`retry_delay`: at most
    one attempt per interval, however many requests arrive), and the
    keys already held stay valid until they are ``SIGLIP_API_KEY_MAX_STALENESS_SECONDS`` old.
    Past that, requests with a key get a 503 with ``Retry-After`` until a read succeeds
    (docs/api.md, "During a Secrets Manager outage").

    Where the reads run: on Lambda (whose environment is frozen between invocations) in the
    request that finds the keys due, so the first request after a quiet spell waits for the read
    (a few ms) and gets a 200. In `serve` a thread of its own keeps the keys fresh on that
    schedule, traffic or none (`ApiKeyAuthenticator.keep_fresh`): no request ever waits for
    Secrets Manager, which would hold the event loop and every connection on it, and a quiet
    spell never leaves the keys stale while Secrets Manager answers. A request that finds them
    due all the same (the process was stopped) starts a read in the background.

    An init that will be snapshotted (SnapStart) must not hold a key: it checks the secret with
    ``DescribeSecret`` instead (`ApiKeyAuthenticator.check_readable`: it exists, is not being
    deleted, has a current version; the value is never sent), and the keys are read after each
    restore (`ApiKeyAuthenticator.reload`, with a deadline). Its warm-up request presents a key made
    for it alone (`ApiKeyAuthenticator.warm_up_key`), valid only while it runs.

    A presented token is compared with every key in constant time (``hmac.compare_digest`` over
    SHA-256 digests, so neither content nor length leaks through timing). No key, and no token, is
    ever written to a log or an error message.

    ``background``: the read runs in a thread of its own and no request waits for it
    (`serve`, which also calls `keep_fresh`). Otherwise (Lambda, whose environment is frozen
    between invocations) the request that finds the keys due makes the one attempt, bounded
    by the client's timeouts.
    """

    def __init__(
        self,
        secret_id: str,
        *,
        cache_seconds: float,
        max_staleness_seconds: float | None = None,
        refresh_lead_seconds: float = REFRESH_LEAD_SECONDS,
        provider: SecretsProvider | None = None,
        background: bool = False,
        clock: Callable[[], float] = time.monotonic,
        on_refresh_failed: Callable[[], None] | None = None,
    ) -> None:
        # botocore logs every response body at DEBUG, and GetSecretValue's body is the secret:
        # keep that logger at INFO even when the function runs with a DEBUG log level.
        logging.getLogger("botocore.parsers").setLevel(logging.INFO)
        if provider is None:
            provider = default_provider()
        self.secret_id = secret_id
        self.cache_seconds = cache_seconds
        self.max_staleness_seconds = max(
            cache_seconds, max_staleness_seconds if max_staleness_seconds is not None else 0
        )
        #: Age of the keys held at which the next read starts: the cache period, or earlier
        #: where the staleness limit leaves a read less than its longest time to end.
        self.refresh_age = max(
            0.0, min(cache_seconds, self.max_staleness_seconds - refresh_lead_seconds)
        )
        self.provider = provider
        self.background = background
        self.clock = clock
        self.on_refresh_failed = on_refresh_failed
        self.refresh_failures = 0  # consecutive failed reads (0 once a read succeeds)
        self._lock = threading.Lock()
        self._digests: tuple[bytes, ...] = ()
        self._read_at: float | None = None  # clock() when the held keys were read
        self._next_attempt = -math.inf  # no read is attempted before this clock() time
        self._reading = False
        #: Bumped by `forget`: a read that began before is dropped when it ends.
        self._generation = 0
        self._stop = threading.Event()  # ends `keep_fresh`'s thread

    def load(self) -> int:
        """Read and parse the secret now (init); ConfigError if it cannot be used."""
        try:
            self._read(self._generation)
        except Exception as exc:
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_SECRET_ARN: the API key secret cannot be used: "
                f"{describe(exc)}"
            ) from None
        return len(self._digests)

    def check_readable(self) -> None:
        """Check the secret without reading its value (``DescribeSecret``: the init of a
        process that will be snapshotted): it exists, this function may describe it, it is
        not scheduled for deletion and has a current version. ConfigError otherwise. No key
        is held afterwards: requests get 503 until a read succeeds (`reload`)."""
        client = self.provider.client
        try:
            described = client.describe_secret(SecretId=self.secret_id)
        except Exception as exc:
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_SECRET_ARN: the API key secret cannot be described: "
                f"{describe(exc)}"
            ) from None
        if described.get("DeletedDate") is not None:
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_SECRET_ARN: the API key secret is scheduled for deletion"
            )
        stages = described.get("VersionIdsToStages") or {}
        if not any("AWSCURRENT" in labels for labels in stages.values()):
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_SECRET_ARN: the API key secret has no current version "
                "(AWSCURRENT): it holds no value to read"
            )

    @contextmanager
    def warm_up_key(self) -> Iterator[str]:
        """A random key, valid only inside the block and held nowhere else: a request can take
        the whole key check without any real key in the process (SnapStart's warm-up, before
        the snapshot). When the block ends every key is dropped (`forget`)."""
        key = secrets.token_urlsafe(36)
        with self._lock:
            self._digests, self._read_at = (_digest(key),), self.clock()
            self._next_attempt = -math.inf
        try:
            yield key
        finally:
            self.forget()

    def forget(self) -> None:
        """Drop every secret this process holds: the keys, their digests and the provider's
        cache; a read still running is dropped when it ends. Until a read succeeds
        (`reload`, or the next request's attempt), requests with a key get a 503, never an
        open door."""
        with self._lock:
            self._digests, self._read_at = (), None
            self._next_attempt = -math.inf
            self._reading = False
            self._generation += 1
        self.provider.clear_cache()  # type: ignore[no-untyped-call]
        # A process restored from a snapshot must not reuse a connection opened before it.
        client = getattr(self.provider, "client", None)
        if client is not None:
            client.close()

    def reload(self, *, timeout: float | None = None) -> int:
        """Read the keys now, failing closed: the number of keys, or KeysUnavailableError
        (nothing is held then, and requests get 503 until a later read succeeds).

        ``timeout``: the read runs in a thread of its own and this returns or raises within
        that many seconds whatever Secrets Manager does (a read that hangs past it is
        dropped when it ends)."""
        self.forget()
        with self._lock:
            generation = self._generation
        if timeout is None:
            read = self._attempt(generation)
        else:
            outcome: list[bool] = []
            reader = threading.Thread(
                target=lambda: outcome.append(self._attempt(generation)),
                name="siglip-api-key-reload",
                daemon=True,
            )
            reader.start()
            reader.join(timeout)
            if reader.is_alive():
                self.forget()
                logger.error(
                    "could not read the API key secret within the deadline: no key is held "
                    "and requests with a key get 503 until a read succeeds",
                    extra={"deadline_s": timeout},
                )
                if self.on_refresh_failed is not None:
                    self.on_refresh_failed()
                raise KeysUnavailableError(retry_after=1)
            read = bool(outcome and outcome[0])
        if not read:
            with self._lock:
                retry_after = self._retry_after(self.clock())
            raise KeysUnavailableError(retry_after=retry_after)
        return len(self._digests)

    def _read(self, generation: int) -> None:
        keys = read_keys(self.secret_id, provider=self.provider)
        digests = tuple(_digest(key) for key in keys)
        with self._lock:
            if generation != self._generation:
                return  # dropped by `forget` while it ran
            if self._digests and set(digests) != set(self._digests):
                logger.info("API keys changed", extra={"api_keys": len(digests)})
            self._digests, self._read_at = digests, self.clock()
            self._next_attempt = -math.inf
            self._reading = False
            self.refresh_failures = 0

    def _attempt(self, generation: int) -> bool:
        """One read of the secret for the keys of `generation` (dropped if `forget` runs
        meanwhile); on failure, log, count and schedule the next attempt."""
        try:
            self._read(generation)
        except Exception as exc:
            with self._lock:
                if generation != self._generation:
                    return False  # dropped by `forget` while it ran: reported there
                self._reading = False
                self.refresh_failures += 1
                now = self.clock()
                self._next_attempt = now + retry_delay(self.refresh_failures, self.cache_seconds)
                fresh = self._fresh(now)
                failures, wait = self.refresh_failures, self._next_attempt - now
            message = (
                "could not refresh the API key secret; the keys already held stay valid"
                if fresh
                else "could not read the API key secret and no usable key is held: "
                "requests with a key get 503 until a read succeeds"
            )
            (logger.warning if fresh else logger.error)(
                message,
                extra={
                    "error": describe(exc),
                    "consecutive_failures": failures,
                    "next_attempt_s": round(wait, 1),
                },
            )
            if self.on_refresh_failed is not None:
                self.on_refresh_failed()
            return False
        return True

    def _fresh(self, now: float) -> bool:
        return (
            bool(self._digests)
            and self._read_at is not None
            and now - self._read_at <= self.max_staleness_seconds
        )

    def _retry_after(self, now: float) -> int:
        """Seconds until a request may find usable keys: until the next attempt when one is
        scheduled after a failure, else 1 (a read is running, or may start now)."""
        wait = self._next_attempt - now
        return max(1, math.ceil(wait)) if wait > 0 else 1

    def keep_fresh(self) -> None:
        """Read the keys on schedule in a thread of its own from now on (`serve`), whether
        requests come or not, until `stop`: a quiet spell never leaves them stale."""
        threading.Thread(target=self._keep_fresh, name="siglip-api-key-fresh", daemon=True).start()

    def stop(self) -> None:
        """End `keep_fresh`'s thread (a read it has begun ends on its own)."""
        self._stop.set()

    def _keep_fresh(self) -> None:
        while not self._stop.wait(self._until_due()):
            claimed = self._claim_read()
            if claimed is not None:
                self._attempt(claimed)

    def _until_due(self) -> float:
        """Seconds until a read is due (`refresh_age`, or the next attempt after a failure)."""
        with self._lock:
            now = self.clock()
            if self._reading:
                return KEEP_FRESH_POLL_SECONDS
            due = now if self._read_at is None else self._read_at + self.refresh_age
            return max(0.0, max(due, self._next_attempt) - now)

    def _claim_read(self) -> int | None:
        """The generation to read for when a read is due and none runs (this caller makes
        it), else None."""
        with self._lock:
            now = self.clock()
            due = self._read_at is None or now - self._read_at >= self.refresh_age
            if not due or self._reading or now < self._next_attempt:
                return None
            self._reading = True
            return self._generation

    def digests(self) -> tuple[bytes, ...]:
        """Digests of the valid keys; KeysUnavailableError (503) when none may be used."""
        generation = self._claim_read()
        if generation is not None:
            if self.background:
                threading.Thread(
                    target=self._attempt,
                    args=(generation,),
                    name="siglip-api-key-refresh",
                    daemon=True,
                ).start()
            else:
                self._attempt(generation)
        now = self.clock()
        with self._lock:
            if self._fresh(now):
                return self._digests
            retry_after = self._retry_after(now)
        raise KeysUnavailableError(retry_after=retry_after)

    def __call__(self, authorization: str | None) -> None:
        check_bearer(authorization, self.digests())


def retry_delay(failures: int, cache_seconds: float) -> float:
    """Seconds before the next read after ``failures`` consecutive failed ones: doubling from
    `RETRY_BASE_SECONDS`, at most `RETRY_MAX_SECONDS` and at most the cache period."""
    delay = RETRY_BASE_SECONDS * 2 ** min(failures - 1, 16)
    return float(min(delay, RETRY_MAX_SECONDS, max(cache_seconds, RETRY_BASE_SECONDS)))


def build_authenticator(
    settings: Settings,
    *,
    provider: SecretsProvider | None = None,
    background: bool = False,
    keep_fresh: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_refresh_failed: Callable[[], None] | None = None,
    read_now: bool = True,
) -> ApiKeyAuthenticator | KeyFileAuthenticator:
    """The authenticator for ``auth_mode == "api-key"``, its keys loaded (ConfigError if not):
    the key file's (`KeyFileAuthenticator`) when ``api_key_file`` is set, else the secret's.

    ``background`` (`serve`): reads off the request path, and, unless ``keep_fresh`` is
    False, kept fresh by a thread of their own (`ApiKeyAuthenticator.keep_fresh`).

    ``read_now=False`` (an init that will be snapshotted): the secret is checked without
    reading its value (`ApiKeyAuthenticator.check_readable`) and no key is held until a read
    (`ApiKeyAuthenticator.reload` after the restore)."""
    if settings.api_key_file is not None:
        return build_key_file_authenticator(
            settings, clock=clock, on_refresh_failed=on_refresh_failed
        )
    if not settings.api_key_secret_arn:
        raise ConfigError(
            f"{ENV_PREFIX}API_KEY_SECRET_ARN is not set (required when {ENV_PREFIX}AUTH_MODE "
            f"is api-key; serve can read its keys from a file instead: --api-key-file or "
            f"{ENV_PREFIX}API_KEY_FILE)"
        )
    authenticator = ApiKeyAuthenticator(
        settings.api_key_secret_arn,
        cache_seconds=settings.api_key_cache_seconds,
        max_staleness_seconds=settings.api_key_max_staleness_seconds,
        provider=provider,
        background=background,
        clock=clock,
        on_refresh_failed=on_refresh_failed,
    )
    if not read_now:
        authenticator.check_readable()
        logger.info("API key authentication on: the secret is readable, its keys not read yet")
        return authenticator
    keys = authenticator.load()
    logger.info("API key authentication on", extra={"api_keys": keys})
    if background if keep_fresh is None else keep_fresh:
        authenticator.keep_fresh()
    return authenticator


class KeyFileAuthenticator:
    """Checks Bearer tokens against the keys of a key file (`key_file`: one per line, private
    to its owner), picking up a changed file without a restart.

    At most once every ``check_seconds`` (the request that finds the check due makes it: one
    ``stat``, microseconds) the file's `Signature` is compared with the one read; a changed
    file is read again, and then:

    - it holds keys: they replace those held (an added key works, a deleted one no longer);
      a file of comments only means no key is valid (every keyed request gets 401);
    - the group or others may now read it (`KeyFileExposed`): the keys it held may be known
      beyond their owner, so none is accepted (503 with ``Retry-After``) until its mode is
      private again, as ssh refuses a private key others can read; never open;
    - it cannot be read, or holds something else (deleted, a half-written edit, a short key):
      the keys held stay valid and the error is logged, once per state of the file, until a
      read succeeds. A server whose key file is being edited keeps serving; to revoke every
      key, empty the file of keys, don't delete it.
    """

    def __init__(
        self,
        path: Path,
        *,
        check_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        on_refresh_failed: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.check_seconds = check_seconds
        self.clock = clock
        self.on_refresh_failed = on_refresh_failed
        self._lock = threading.Lock()
        self._digests: tuple[bytes, ...] = ()
        self._signature: Signature | None = None  # of the file the held keys were read from
        self._failed: Signature | str | None = None  # the state last reported as failing
        self._exposed = False
        self._next_check = -math.inf

    def load(self) -> int:
        """Read the file now (the start); ConfigError if it cannot be used or holds no key."""
        try:
            keys, read = read_key_file(self.path)
        except KeyFileError as exc:
            raise ConfigError(f"{ENV_PREFIX}API_KEY_FILE: {exc}") from None
        if not keys:
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_FILE: {self.path} holds no key (one per line; blank "
                "lines and # comments are ignored)"
            )
        with self._lock:
            self._digests = tuple(_digest(key) for key in keys)
            self._signature, self._next_check = read, self.clock() + self.check_seconds
        return len(keys)

    def _check(self) -> None:
        """Read the file again if its check is due and it has changed since the last read."""
        with self._lock:
            now = self.clock()
            if now < self._next_check:
                return
            self._next_check = now + self.check_seconds
            held = self._signature
        try:
            if signature(self.path) == held:
                return
            keys, read = read_key_file(self.path)
        except KeyFileExposed as exc:
            self._refuse(exc)
            return
        except (KeyFileError, OSError) as exc:
            self._keep(exc)
            return
        digests = tuple(_digest(key) for key in keys)
        with self._lock:
            changed = set(digests) != set(self._digests) or self._exposed
            self._digests, self._signature = digests, read
            self._exposed, self._failed = False, None
        if changed:
            (logger.info if digests else logger.warning)(
                "API key file read: %d key(s)%s",
                len(digests),
                "" if digests else ", so every request with a key gets 401",
                extra={"api_keys": len(digests)},
            )

    def _refuse(self, exc: KeyFileError) -> None:
        with self._lock:
            report = not self._exposed
            self._exposed, self._signature, self._failed = True, None, None
        if report:
            logger.error("%s; no key is accepted (503) until it is private again", exc)
            if self.on_refresh_failed is not None:
                self.on_refresh_failed()

    def _keep(self, exc: KeyFileError | OSError) -> None:
        problem = str(exc) if isinstance(exc, KeyFileError) else f"{self.path}: {exc.strerror}"
        with self._lock:
            report = self._failed != problem
            self._failed = problem
        if report:
            logger.warning(
                "the API key file cannot be used (%s); the keys held stay valid", problem
            )
            if self.on_refresh_failed is not None:
                self.on_refresh_failed()

    def digests(self) -> tuple[bytes, ...]:
        """Digests of the valid keys; KeysUnavailableError (503) while the file is exposed."""
        self._check()
        with self._lock:
            if self._exposed:
                raise KeysUnavailableError(retry_after=max(1, math.ceil(self.check_seconds)))
            return self._digests

    def __call__(self, authorization: str | None) -> None:
        check_bearer(authorization, self.digests())


def build_key_file_authenticator(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.monotonic,
    on_refresh_failed: Callable[[], None] | None = None,
) -> KeyFileAuthenticator:
    """The key file's authenticator, its keys read (ConfigError if the file cannot be used)."""
    assert settings.api_key_file is not None
    authenticator = KeyFileAuthenticator(
        settings.api_key_file,
        check_seconds=settings.api_key_file_check_seconds,
        clock=clock,
        on_refresh_failed=on_refresh_failed,
    )
    keys = authenticator.load()
    logger.info(
        "API key authentication on: %d key(s) from %s, checked for changes every %g s",
        keys,
        settings.api_key_file,
        settings.api_key_file_check_seconds,
        extra={"api_keys": keys},
    )
    return authenticator
