"""With the key cache period and staleness limit at their minimum (10 s each) and Secrets
Manager answering, no keyed request ever gets a 503: not after a quiet spell longer than the
staleness limit, not under steady traffic across the refreshes. Through `serve` (a real
``siglip-text serve --demo``, its keys kept fresh by a thread of their own) and through the
Lambda handler (its reads in the request), at once, in real time.

Secrets Manager is moto's server on loopback; ``-rP`` shows the counts (lines starting TRIED).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from devkit.aws_lambda import LambdaContext, built_lambda, lambda_answer, load_event
from devkit.keys import KEY
from devkit.secrets_manager import secrets_server
from devkit.servers import running_server

pytestmark = pytest.mark.slow  # 37 s of real time, a server subprocess

SHORTEST = {"SIGLIP_API_KEY_CACHE_SECONDS": "10", "SIGLIP_API_KEY_MAX_STALENESS_SECONDS": "10"}
QUIET_SECONDS = 12
AFTER_QUIET = 5
STEADY_SECONDS = 25


def test_with_the_shortest_key_periods_no_keyed_request_gets_a_503_while_secrets_manager_answers(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statuses: dict[str, Counter[int]] = {"serve": Counter(), "lambda": Counter()}
    event = load_event("rest-embeddings-with-api-key.json")
    with (
        secrets_server(KEY, monkeypatch) as secrets,
        running_server(
            SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=secrets.arn, **SHORTEST
        ) as live,
        built_lambda(
            demo_dir, SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=secrets.arn, **SHORTEST
        ) as entry,
        httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=30) as client,
    ):

        def both() -> None:
            served = client.post(live.url, json={"input": ["a red block on the table"]})
            statuses["serve"][served.status_code] += 1
            status, _, _ = lambda_answer(entry.handler(event, LambdaContext()))
            statuses["lambda"][status] += 1

        # GIVEN both entry points up, then a quiet spell longer than the staleness limit
        time.sleep(QUIET_SECONDS)
        # WHEN keyed requests come, then steady keyed traffic across two refresh periods
        for _ in range(AFTER_QUIET):
            both()
        after_quiet = {name: dict(counts) for name, counts in statuses.items()}
        deadline = time.monotonic() + STEADY_SECONDS
        while time.monotonic() < deadline:
            both()
    print(f"TRIED after {QUIET_SECONDS} s idle: {after_quiet}; then {STEADY_SECONDS} s: {statuses}")
    # THEN every one was served: no 503 while Secrets Manager answers
    assert after_quiet == {"serve": {200: AFTER_QUIET}, "lambda": {200: AFTER_QUIET}}
    for name, counts in statuses.items():
        assert set(counts) == {200}, (name, counts)
