"""The secret format and the Authorization header parsing of auth.py (no AWS involved)."""

from __future__ import annotations

import pytest
from siglip_text.http.auth import bearer_token
from siglip_text.http.errors import AuthenticationError
from siglip_text.http.key_secret import SecretFormatError, parse_keys

KEY = "sk-0123456789abcdef-new"
OLD = "sk-0123456789abcdef-old"


def test_a_plain_secret_is_one_key_with_surrounding_whitespace_removed() -> None:
    assert parse_keys(f"  {KEY}\n") == (KEY,)


def test_a_binary_secret_is_decoded_as_utf8() -> None:
    assert parse_keys(KEY.encode()) == (KEY,)


def test_a_json_secret_lists_every_valid_key_for_rotation() -> None:
    assert parse_keys(f'{{"keys": ["{KEY}", "{OLD}"]}}') == (KEY, OLD)


@pytest.mark.parametrize(
    "secret",
    [
        '{"keys": []}',
        '{"keys": "sk-0123456789abcdef"}',
        '{"key": ["sk-0123456789abcdef"]}',
        '{"keys": ["sk-0123456789abcdef", 7]}',
        '{"keys": ["sk-0123456789abcdef"',
        "short-key",
        '{"keys": ["sk-0123456789abcdef", "short"]}',
        "   ",
    ],
)
def test_a_malformed_or_weak_secret_is_refused_without_quoting_it(secret: str) -> None:
    with pytest.raises(SecretFormatError) as raised:
        parse_keys(secret)
    assert "0123456789abcdef" not in str(raised.value)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (f"Bearer {KEY}", KEY),
        (f"bearer {KEY}", KEY),
        (f"  Bearer   {KEY}  ", KEY),
    ],
)
def test_bearer_token_is_read_case_insensitively(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer ", f"Basic {KEY}", KEY, f"Bearer {KEY} extra"]
)
def test_a_missing_or_malformed_authorization_header_is_an_authentication_error(
    header: str | None,
) -> None:
    with pytest.raises(AuthenticationError) as raised:
        bearer_token(header)
    assert KEY not in raised.value.message
