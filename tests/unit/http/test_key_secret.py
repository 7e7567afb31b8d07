"""http/key_secret.py: the secret's two forms, its one read (moto's Secrets Manager), and
what a failure may say."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from siglip_text.http.key_secret import (
    MIN_KEY_LENGTH,
    SecretFormatError,
    default_provider,
    describe,
    parse_keys,
    read_keys,
)

KEY = "k" * MIN_KEY_LENGTH


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
def secret_arn(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        yield client.create_secret(Name="siglip-text/api-key", SecretString=KEY)["ARN"]


def test_read_keys_reads_the_secret_now_every_time(secret_arn: str) -> None:
    provider = default_provider()
    assert read_keys(secret_arn, provider=provider) == (KEY,)
    # WHEN the secret is rotated
    rotated = "r" * MIN_KEY_LENGTH
    boto3.client("secretsmanager", region_name="us-east-1").put_secret_value(
        SecretId=secret_arn, SecretString=json.dumps({"keys": [rotated, KEY]})
    )
    # THEN the next read sees it: the provider's cache is never used
    assert read_keys(secret_arn, provider=provider) == (rotated, KEY)


def test_describe_names_the_error_of_a_missing_secret_and_bounds_its_length(
    secret_arn: str,
) -> None:
    with pytest.raises(Exception) as raised:
        read_keys(secret_arn + "-gone", provider=default_provider())
    said = describe(raised.value)
    assert said.startswith(type(raised.value).__name__)
    assert len(said) <= len(type(raised.value).__name__) + 2 + 300
