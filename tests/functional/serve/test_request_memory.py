"""Memory bounded per request, against a real `siglip-text serve --demo`: the two bodies
that make the most Python objects per byte of a request, refused with their peak resident
memory growth bounded, and accepted maximal bodies of texts that cost the tokenizer the
most per byte (the server's VmHWM, reset before each is sent).

``-rP`` shows the growth measured (the line starting TRIED).
"""

from __future__ import annotations

import http.client
import json

import pytest

from benchmarks.request_memory import texts_of
from devkit.openai_shapes import assert_openai_error
from devkit.servers import MIB, running_server

pytestmark = pytest.mark.slow  # a server subprocess

#: The growth the two bodies together may cause (the acceptance bound).
MAX_PEAK_GROWTH = 150 * MIB
TOKEN_IDS = 3_100_000
ONE_TOKEN_ARRAYS = 1_048_000


def flat_token_ids() -> bytes:
    """One input of 3.1 million token ids, 6.29 MB (just under the 6 MiB body limit)."""
    ids = b",".join([b"10"] * 90_000 + [b"1"] * (TOKEN_IDS - 90_000))
    return b'{"input":[' + ids + b"]}"


def one_token_arrays() -> bytes:
    """1,048,000 inputs of one token id each, 4.2 MB."""
    return b'{"input":[' + b",".join([b"[1]"] * ONE_TOKEN_ARRAYS) + b"]}"


def post(port: int, body: bytes, path: str = "/v1/embeddings") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_two_costliest_bodies_grow_peak_memory_by_at_most_150_mib() -> None:
    bodies = {"3.1M token ids": flat_token_ids(), "1,048,000 one-token arrays": one_token_arrays()}
    assert len(bodies["3.1M token ids"]) <= 6 * MIB
    with running_server(SIGLIP_AUTH_MODE="none") as live:
        # GIVEN a warm server (one ordinary request served) and its peak memory reset
        assert post(live.port, json.dumps({"input": ["warm up"] * 8}).encode())[0] == 200
        live.reset_peak()
        before = live.rss()
        # WHEN both bodies are sent, one after the other
        answers = {name: post(live.port, body) for name, body in bodies.items()}
        growth = live.peak_rss() - before
    statuses = {name: status for name, (status, _) in answers.items()}
    print(f"TRIED memory: statuses {statuses}, peak RSS growth {growth / MIB:.1f} MiB")
    # THEN each is refused as too large a request, and together they grew peak memory by at
    # most the bound
    assert set(statuses.values()) == {413}, statuses
    for _, content in answers.values():
        assert_openai_error(json.loads(content))
    assert growth <= MAX_PEAK_GROWTH, f"{growth / MIB:.0f} MiB"


#: The growth one accepted maximal body of texts may cause, whatever its texts are made of
#: (docs/api.md states it; 610 MiB for the emoji body before the tokenizer's byte windows).
MAX_TEXT_BODY_GROWTH = 100 * MIB


def test_a_maximal_body_of_texts_grows_peak_memory_by_at_most_100_mib() -> None:
    # 2048 texts of about 3,060 UTF-8 bytes (6.28 MB): emoji, each up to 4 tokens; CJK;
    # spaces; on /v1/embeddings and, for emoji, on /tokenize (a token object per kept token)
    cases = [("emoji", "/v1/embeddings"), ("cjk", "/v1/embeddings"), ("spaces", "/v1/embeddings")]
    cases.append(("emoji", "/tokenize"))
    growth: dict[str, float] = {}
    with running_server(SIGLIP_AUTH_MODE="none") as live:
        assert post(live.port, json.dumps({"input": ["warm up"] * 8}).encode())[0] == 200
        for body, route in cases:
            field = "input" if route == "/v1/embeddings" else "inputs"
            payload = json.dumps({field: texts_of(body)}, ensure_ascii=False).encode()
            assert len(payload) <= 6 * MIB
            live.reset_peak()
            before = live.rss()
            status, content = post(live.port, payload, route)
            assert status == 200, content[:300]
            growth[f"{body} {route}"] = (live.peak_rss() - before) / MIB
    print("TRIED text bodies: peak RSS growth MiB", {k: round(v, 1) for k, v in growth.items()})
    assert max(growth.values()) <= MAX_TEXT_BODY_GROWTH / MIB, growth
