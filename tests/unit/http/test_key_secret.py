"""http/key_secret.py: the secret's two forms, its one read (moto's Secrets Manager), and
what a failure may say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from siglip_text.http.key_secret import (
    MIN_KEY_LENGTH,
    SecretFormatError,
    default_provider,
    describe,
    parse_keys,
    read_keys,
)

from devkit.keys import KEY, NEW_KEY
from devkit.secrets_manager import in_process_secret


def test_a_plain_secret_is_the_one_key() -> None:
    assert parse_keys(f"  {KEY}\n") == (KEY,)
    assert parse_keys(KEY.encode()) == (KEY,)


def test_a_json_secret_lists_every_valid_key_in_its_order() -> None:
    new, old = "n" * 20, "o" * 20
    assert parse_keys(json.dumps({"keys": [new, old]})) == (new, old)


@pytest.mark.parametrize(
    ("secret", "says"),
    [
        ("{not json", "not valid JSON"),
        ('{"keys": []}', "non-empty"),
        ('{"other": ["x"]}', "non-empty"),
        ('{"keys": [1]}', "must be a string"),
        ("short", f"at least {MIN_KEY_LENGTH} characters"),
    ],
)
def test_a_malformed_secret_is_refused_without_quoting_it(secret: str, says: str) -> None:
    with pytest.raises(SecretFormatError) as raised:
        parse_keys(secret)
    assert says in str(raised.value)
    assert describe(raised.value) == str(raised.value)


@pytest.fixture
def secret() -> Iterator[tuple[Any, str]]:
    with in_process_secret(KEY) as found:
        yield found


def test_read_keys_reads_the_secret_now_every_time(secret: tuple[Any, str]) -> None:
    client, arn = secret
    provider = default_provider()
    assert read_keys(arn, provider=provider) == (KEY,)
    # WHEN the secret is rotated
    client.put_secret_value(SecretId=arn, SecretString=json.dumps({"keys": [NEW_KEY, KEY]}))
    # THEN the next read sees it: the provider's cache is never used
    assert read_keys(arn, provider=provider) == (NEW_KEY, KEY)


def test_describe_names_the_error_of_a_missing_secret_and_bounds_its_length(
    secret: tuple[Any, str],
) -> None:
    with pytest.raises(Exception) as raised:
        read_keys(secret[1] + "-gone", provider=default_provider())
    said = describe(raised.value)
    assert said.startswith(type(raised.value).__name__)
    assert len(said) <= len(type(raised.value).__name__) + 2 + 300
