"""A ``Host`` header (or an absolute-form target's authority) read as RFC 3986 writes it.

``Host = uri-host [ ":" port ]`` (RFC 9110 section 7.2), where ``uri-host`` is RFC 3986's
``host`` (section 3.2.2): an IP literal in brackets (IPv6, or IPvFuture), an IPv4 address, or
a registered name of unreserved characters, percent-encodings and sub-delimiters; and
``port = *DIGIT`` (section 3.2.3). Anything else after the host (``[::1]evil.example``,
``127.0.0.1@evil``, a user-info part, a second colon) makes the value no authority at all.
"""

from __future__ import annotations

import ipaddress
import re

_AUTHORITY = re.compile(
    r"(?P<host>\[(?P<literal>[^\[\]]*)\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::(?P<port>[0-9]*))?"
)
_IPV_FUTURE = re.compile(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")


def authority_host(value: str) -> str | None:
    """The host of ``value``, lower-cased, an IPv6 literal in its compressed form within
    brackets (``[0:0::1]`` is ``[::1]``); None when ``value`` is not ``host [":" port]``."""
    found = _AUTHORITY.fullmatch(value.strip(" \t"))
    if found is None:
        return None
    literal = found["literal"]
    if literal is None:
        return found["host"].lower()
    if _IPV_FUTURE.fullmatch(literal):
        return f"[{literal.lower()}]"
    if "%" in literal:  # a zone (RFC 6874): Python reads it as a scope; no host of ours
        return None
    try:
        return f"[{ipaddress.IPv6Address(literal).compressed}]"
    except ValueError:  # no address
        return None


def host_allowed(host: bytes | None, allowed: frozenset[str]) -> bool:
    """Whether a ``Host`` value names one of ``allowed`` (any port); none sent is allowed (a
    request without one is HTTP/1.0, or refused for it elsewhere)."""
    if host is None:
        return True
    name = authority_host(host.decode("latin-1"))
    return name is not None and name in allowed
