"""The API key secret: its forms and its one read.

The secret (``SIGLIP_API_KEY_SECRET_ARN``) holds the valid keys as its ``SecretString``, in
one of two forms:

- a plain string: the one valid key (what ``template.yaml`` generates);
- a JSON object ``{"keys": ["<new key>", "<old key>"]}``: every listed key is valid, so a
  rotation can keep the old key working while clients move to the new one.

Keys are at least `MIN_KEY_LENGTH` characters. The secret is read one way only: `read_keys`,
with Powertools Parameters (``SecretsProvider``, the provider behind
``parameters.get_secret``); when to read is the authenticator's call (`auth`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

MIN_KEY_LENGTH = 16

#: `default_provider`'s bounds on one read of the secret (one attempt, no retry).
CONNECT_TIMEOUT_SECONDS = 2.0
READ_TIMEOUT_SECONDS = 3.0


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


def read_keys(secret_id: str, *, provider: SecretsProvider | None = None) -> tuple[str, ...]:
    """The valid keys the secret holds now: one ``GetSecretValue`` through Powertools' provider
    (`default_provider` unless given), never its cache (the caller decides when to read).
    The one way this project reads the key secret."""
    if provider is None:
        provider = default_provider()
    raw = provider.get(secret_id, force_fetch=True)
    if not isinstance(raw, str | bytes):
        raise SecretFormatError("the secret value must be a string")
    return parse_keys(raw)


def default_provider(
    *,
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> SecretsProvider:
    """A Secrets Manager provider whose one read takes at most the two timeouts: one attempt
    per read, no retry (the authenticator schedules the next attempt itself)."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from botocore.config import Config

    config = Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return SecretsProvider(boto_config=config)


def describe(exc: BaseException) -> str:
    """What went wrong, without the secret's content: SecretFormatError texts never quote it,
    and botocore errors name the operation and the secret id only."""
    if isinstance(exc, SecretFormatError):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc)[:300]}"
