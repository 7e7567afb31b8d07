"""gate.py: the front's decision from a request's head alone, in the order the module states."""

from __future__ import annotations

from typing import Any

import pytest
from siglip_text.http.errors import (
    InvalidHeaderError,
    InvalidHostError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    RouteNotFoundError,
    ShuttingDownError,
    UnsupportedContentEncodingError,
    UnsupportedMediaTypeError,
)
from siglip_text.http.gate import LOOPBACK_HOSTS, Decision, Head, Policy, decide

ROUTES = (("POST", "/v1/embeddings"), ("GET", "/v1/models"), ("HEAD", "/v1/models"))
ROUTES += (("GET", "/health"), ("HEAD", "/health"))
POLICY = Policy(
    routes=ROUTES,
    body_routes=frozenset({("POST", "/v1/embeddings")}),
    max_body_bytes=100,
    keyed=True,
    json_only=True,
    allowed_hosts=LOOPBACK_HOSTS,
)
JSON = {"content_type": b"application/json", "content_length": b"10"}


def post(**head: Any) -> Head:
    return Head(method="POST", path="/v1/embeddings", has_body=True, **{**JSON, **head})


def refusal_kind(decision: Decision) -> type | None:
    return type(decision.refusal) if decision.refusal is not None else None


def test_an_ordinary_post_is_admitted_after_the_key_check() -> None:
    assert decide(post(), POLICY, expired=False) == Decision(check_key=True, admit=True)


def test_a_get_under_v1_checks_the_key_and_health_passes_as_it_is() -> None:
    models = Head(method="HEAD", path="/v1/models", has_body=False)
    assert decide(models, POLICY, expired=False) == Decision(check_key=True)
    health = Head(method="GET", path="/health", has_body=False)
    assert decide(health, POLICY, expired=False) == Decision()
    open_policy = Policy(routes=ROUTES, body_routes=POLICY.body_routes, max_body_bytes=100)
    assert decide(models, open_policy, expired=False) == Decision()


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (post(host=b"evil.example:8000"), InvalidHostError),
        (post(authorization=(b"Bearer a", b"Bearer b")), InvalidHeaderError),
        (post(authorization=(b"Bearer a, Bearer b",)), InvalidHeaderError),
        (post(content_type=b"text/plain"), UnsupportedMediaTypeError),
        (post(content_encoding=b"gzip"), UnsupportedContentEncodingError),
        (post(content_length=b"101"), PayloadTooLargeError),
        (Head(method="GET", path="/health", has_body=True), PayloadTooLargeError),
        (Head(method="PUT", path="/health", has_body=True), MethodNotAllowedError),
        (Head(method="POST", path="/nowhere", has_body=True), RouteNotFoundError),
    ],
)
def test_each_refusal_from_the_head(head: Head, kind: type) -> None:
    decision = decide(head, POLICY, expired=False)
    assert refusal_kind(decision) is kind and not decision.admit


def test_the_host_and_a_doubled_key_are_refused_before_the_key_is_checked() -> None:
    for head in (post(host=b"evil.example"), post(authorization=(b"Bearer a", b"Bearer b"))):
        assert not decide(head, POLICY, expired=False).check_key
    doubled = Head(method="GET", path="/v1/models", has_body=False, authorization=(b"a", b"b"))
    assert refusal_kind(decide(doubled, POLICY, expired=False)) is InvalidHeaderError


def test_a_body_refusal_waits_for_the_key_check_so_a_keyless_client_learns_nothing() -> None:
    decision = decide(post(content_encoding=b"br"), POLICY, expired=False)
    assert decision.check_key and decision.body_left


def test_identity_is_the_one_coding_accepted() -> None:
    for coding in (b"identity", b" Identity "):
        assert decide(post(content_encoding=coding), POLICY, expired=False).admit


def test_after_the_grace_period_every_request_is_a_503() -> None:
    assert refusal_kind(decide(post(), POLICY, expired=True)) is ShuttingDownError
    health = Head(method="GET", path="/health", has_body=False)
    assert refusal_kind(decide(health, POLICY, expired=True)) is ShuttingDownError


def test_the_head_of_a_scope_reads_every_authorization_and_the_body_signs() -> None:
    scope = {
        "method": "POST",
        "path": "/v1/embeddings",
        "headers": [
            (b"authorization", b"Bearer a"),
            (b"authorization", b"Bearer b"),
            (b"content-length", b"000"),
            (b"expect", b"100-Continue"),
        ],
    }
    head = Head.of(scope)
    assert head.authorization == (b"Bearer a", b"Bearer b")
    assert not head.has_body and head.expects_continue
    assert Head.of({**scope, "headers": [(b"transfer-encoding", b"chunked")]}).has_body
