"""`http.authority`: a Host value read as an RFC 3986 authority, ``host [":" port]``."""

from __future__ import annotations

import pytest
from siglip_text.http.authority import authority_host, host_allowed

LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})


@pytest.mark.parametrize(
    ("value", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("LocalHost:", "localhost"),
        ("[::1]", "[::1]"),
        ("[0:0:0:0:0:0:0:1]:80", "[::1]"),
        ("[v1.fe80::a+en1]", "[v1.fe80::a+en1]"),
        ("example.com", "example.com"),
        ("", ""),
        ("[::1]evil.example", None),
        ("[::1]:80evil", None),
        ("127.0.0.1@evil.example", None),
        ("user@127.0.0.1", None),
        ("127.0.0.1:80:80", None),
        ("127.0.0.1:8o", None),
        ("[fe80::1%25eth0]", None),
        ("[not an address]", None),
        ("a b", None),
        ("h/path", None),
    ],
)
def test_the_host_of_an_authority(value: str, host: str | None) -> None:
    assert authority_host(value) == host


def test_only_loopback_authorities_are_allowed() -> None:
    assert host_allowed(b"[::1]:8080", LOOPBACK) and host_allowed(b"LOCALHOST", LOOPBACK)
    assert host_allowed(None, LOOPBACK)
    for value in (b"[::1]evil.example", b"evil.example", b"127.0.0.1.evil", b"127.0.0.1@x"):
        assert not host_allowed(value, LOOPBACK), value
