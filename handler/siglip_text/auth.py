"""API keys (auth mode ``api-key``): ``Authorization: Bearer <key>``, keys in Secrets Manager.

The secret (``SIGLIP_API_KEY_SECRET_ARN``) holds the valid keys as its ``SecretString``, in
one of two forms:

- a plain string: the one valid key (what ``template.yaml`` generates);
- a JSON object ``{"keys": ["<new key>", "<old key>"]}``: every listed key is valid, so a
  rotation can keep the old key working while clients move to the new one.

Keys are at least 16 characters. The secret is read with Powertools Parameters
(``SecretsProvider``, the provider behind ``parameters.get_secret``) and cached for
``SIGLIP_API_KEY_CACHE_SECONDS``: one Secrets Manager call per execution environment per
period, the first at init, so a missing secret or permission fails the start. When a later
refresh fails, the keys already held stay valid and a warning is logged.

A presented token is compared with every key in constant time (``hmac.compare_digest`` over
SHA-256 digests, so neither content nor length leaks through timing). No key, and no token, is
ever written to a log or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any

from .config import ENV_PREFIX, Settings
from .errors import AuthenticationError, ConfigError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

logger = logging.getLogger("siglip_text.auth")

MIN_KEY_LENGTH = 16
MISSING_KEY_MESSAGE = (
    "You didn't provide an API key. Send it in the header 'Authorization: Bearer <key>'."
)
WRONG_KEY_MESSAGE = "Incorrect API key provided."


class SecretFormatError(ValueError):
    """Raised when the secret's content is not a key or a ``{"keys": [...]}`` object."""


def parse_keys(secret: str | bytes) -> tuple[str, ...]:
    """The valid keys held in a secret value (a plain key, or ``{"keys": [...]}``)."""
    text = secret.decode("utf-8") if isinstance(secret, bytes) else secret
    text = text.strip()
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError:
            raise SecretFormatError("the secret starts with '{' but is not valid JSON") from None
        keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(keys, list) or not keys:
            raise SecretFormatError('a JSON secret must be {"keys": ["<key>", ...]}, non-empty')
        if not all(isinstance(key, str) for key in keys):
            raise SecretFormatError('every entry of "keys" must be a string')
        found = tuple(key.strip() for key in keys)
    else:
        found = (text,)
    if any(len(key) < MIN_KEY_LENGTH for key in found):
        raise SecretFormatError(f"every key must be at least {MIN_KEY_LENGTH} characters")
    return found


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


class ApiKeyAuthenticator:
    """Checks Bearer tokens against the keys of one secret, fetched through a cached provider."""

    def __init__(
        self, secret_id: str, *, cache_seconds: int, provider: SecretsProvider | None = None
    ) -> None:
        # botocore logs every response body at DEBUG, and GetSecretValue's body is the secret:
        # keep that logger at INFO even when the function runs with a DEBUG log level.
        logging.getLogger("botocore.parsers").setLevel(logging.INFO)
        if provider is None:
            provider = default_provider()
        self.secret_id = secret_id
        self.cache_seconds = cache_seconds
        self.provider = provider
        self._raw: Any = None
        self._digests: tuple[bytes, ...] = ()

    def load(self) -> int:
        """Fetch and parse the secret now (init); ConfigError if it cannot be used."""
        try:
            self._refresh()
        except Exception as exc:
            raise ConfigError(
                f"{ENV_PREFIX}API_KEY_SECRET_ARN: the API key secret cannot be used: "
                f"{_describe(exc)}"
            ) from None
        return len(self._digests)

    def _refresh(self) -> None:
        raw = self.provider.get(self.secret_id, max_age=self.cache_seconds)
        if raw is self._raw and self._digests:
            return
        if not isinstance(raw, str | bytes):
            raise SecretFormatError("the secret value must be a string")
        digests = tuple(_digest(key) for key in parse_keys(raw))
        if self._digests and set(digests) != set(self._digests):
            logger.info("API keys changed", extra={"api_keys": len(digests)})
        self._raw, self._digests = raw, digests

    def digests(self) -> tuple[bytes, ...]:
        """Digests of the valid keys: from the provider's cache, refreshed once it expires."""
        try:
            self._refresh()
        except Exception as exc:
            if not self._digests:
                raise ConfigError("the API key secret cannot be read") from None
            logger.warning(
                "could not refresh the API key secret; the keys already held stay valid",
                extra={"error": _describe(exc)},
            )
        return self._digests

    # --- SnapStart (snapstart.py): drop every secret before a snapshot, read again after -----

    def forget(self) -> None:
        """Drop the keys, their digests and the provider's cached secret, and close the
        provider's connections (a restored process must not reuse one opened before)."""
        self._raw, self._digests = None, ()
        self.provider.clear_cache()  # type: ignore[no-untyped-call]
        client = getattr(self.provider, "client", None)
        if client is not None:
            client.close()

    def reload(self) -> int:
        """Read the secret again, bypassing every cache; ConfigError (fail closed) if it
        cannot be used, as at init."""
        self.forget()
        return self.load()

    def __call__(self, authorization: str | None) -> None:
        presented = _digest(bearer_token(authorization))
        valid = False
        for key in self.digests():
            valid |= hmac.compare_digest(presented, key)  # no early exit: constant time
        if not valid:
            raise AuthenticationError(WRONG_KEY_MESSAGE)


def default_provider() -> SecretsProvider:
    """A Secrets Manager provider with short timeouts, so a slow refresh cannot stall requests."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from botocore.config import Config

    config = Config(
        connect_timeout=2, read_timeout=3, retries={"max_attempts": 3, "mode": "standard"}
    )
    return SecretsProvider(config=config)


def build_authenticator(
    settings: Settings, *, provider: SecretsProvider | None = None
) -> ApiKeyAuthenticator:
    """The authenticator for ``auth_mode == "api-key"``, its keys loaded (ConfigError if not)."""
    if not settings.api_key_secret_arn:
        raise ConfigError(
            f"{ENV_PREFIX}API_KEY_SECRET_ARN is not set (required when {ENV_PREFIX}AUTH_MODE "
            "is api-key)"
        )
    authenticator = ApiKeyAuthenticator(
        settings.api_key_secret_arn,
        cache_seconds=settings.api_key_cache_seconds,
        provider=provider,
    )
    keys = authenticator.load()
    logger.info("API key authentication on", extra={"api_keys": keys})
    return authenticator


def _describe(exc: BaseException) -> str:
    """What went wrong, without the secret's content: SecretFormatError texts never quote it,
    and botocore errors name the operation and the secret id only."""
    if isinstance(exc, SecretFormatError):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc)[:300]}"
