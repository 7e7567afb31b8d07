"""The Lambda handler answers every event with a proxy response: 1,500 random mutations of
the events in ``events/`` (REST v1, HTTP API v2, function URL), each answered with a dict, no
500 and no exception. What Mangum cannot read is a 400 before any work (`aws.events`)."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from siglip_text.aws.function import LambdaFunction

from devkit.aws_lambda import LambdaContext, built_lambda, load_event
from devkit.paths import EVENTS

MUTATIONS = 1500
TEMPLATES = sorted(p.name for p in EVENTS.glob("*.json"))
#: Values of every JSON type, and the strings JSON can carry that UTF-8 cannot.
ODD_VALUES: list[Any] = [
    None, 0, 1, -1, 1.5, True, False, "", "x", "443,80", "[::1]evil", "h:", "a:1:2",
    "\ud800", "a\udfffb", "\u00e9", [], [1], [None], [["a"]], ["a", 1], {}, {"a": 1},
    {"a": None}, {"a": ["b"]}, {"a": [1]}, "eyJpbnB1dCI6I",
]  # fmt: skip
#: Keys Mangum and the handler read: mutated more often than the rest.
READ_KEYS = [
    "headers", "multiValueHeaders", "body", "isBase64Encoded", "httpMethod", "path",
    "resource", "version", "rawQueryString", "cookies", "queryStringParameters",
    "multiValueQueryStringParameters", "requestContext", "Host", "host", "X-Forwarded-Port",
    "x-forwarded-port", "http", "method", "sourceIp", "identity", "elb",
]  # fmt: skip


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value, as the keys and indexes that lead to it."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def mutate(event: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One to three random changes: a value replaced, a key dropped or added, a value wrapped
    in a list, or a header duplicated across ``headers`` and ``multiValueHeaders``."""
    event = copy.deepcopy(event)
    for _ in range(rng.randint(1, 3)):
        places = [p for p in paths(event) if p]
        read = [p for p in places if p[-1] in READ_KEYS or (len(p) > 1 and p[-2] in READ_KEYS)]
        place = rng.choice(read if read and rng.random() < 0.7 else places)
        holder: Any = event
        for step in place[:-1]:
            holder = holder[step]
        key = place[-1]
        action = rng.random()
        if action < 0.5:
            holder[key] = rng.choice(ODD_VALUES)
        elif action < 0.65 and isinstance(holder, dict):
            del holder[key]
        elif action < 0.8 and isinstance(holder, dict):
            holder[rng.choice(READ_KEYS)] = rng.choice(ODD_VALUES)
        elif action < 0.9:
            holder[key] = [holder[key]]
        else:
            holder[key] = json.dumps(holder[key]) if rng.random() < 0.5 else {"k": holder[key]}
    return event


@pytest.fixture(scope="module")
def function(demo_dir: Path) -> Iterator[LambdaFunction]:
    with built_lambda(demo_dir) as built:
        yield built


def test_every_mutated_event_gets_a_proxy_response_and_never_a_500(
    function: LambdaFunction,
) -> None:
    # GIVEN the events of every shape, and a seeded mutator
    rng = random.Random(20261206)
    templates = {name: load_event(name) for name in TEMPLATES}
    assert {t.get("version", "rest") for t in templates.values()} >= {"2.0", "rest"}
    failures = []
    for i in range(MUTATIONS):
        name = TEMPLATES[i % len(TEMPLATES)]
        event = mutate(templates[name], rng)
        # WHEN the handler serves each
        try:
            answer = function.handler(event, LambdaContext())
        except Exception as exc:  # THEN none raises
            failures.append((name, i, f"raised {type(exc).__name__}: {exc}"))
            continue
        # AND each is a proxy response, none a 500
        if not isinstance(answer, dict) or not isinstance(answer.get("statusCode"), int):
            failures.append((name, i, f"not a proxy response: {answer!r:.200}"))
        elif answer["statusCode"] >= 500 or not isinstance(answer.get("body", ""), str):
            failures.append((name, i, f"{answer['statusCode']}: {answer.get('body')!r:.300}"))
    assert not failures, f"{len(failures)} of {MUTATIONS}: {failures[:10]}"
