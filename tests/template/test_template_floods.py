"""template.yaml against floods and open doors, evaluated on the template the SAM transform
makes (devkit/sam.py), as CloudFormation evaluates it on deploy: the Rules that refuse a
public function URL without a reservation and IAM auth behind the REST API, and the AWS WAF
web ACL before the REST API's stage (WafRateLimitPerIp, samconfig's prod environment)."""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from typing import Any

import pytest

from devkit.rules import refusals
from devkit.sam import (
    evaluate_conditions,
    parameter_defaults,
    resolve,
    resources_of_type,
    translate,
)


def refused(**overrides: str) -> list[str]:
    """The Rules of the translated template that refuse these parameters (CloudFormation
    evaluates every rule before it creates anything: one refusal fails the deploy)."""
    cfn = translate(overrides)
    return list(refusals(cfn, parameter_defaults(cfn, **overrides)))


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({}, []),  # rest-api, api-key: the defaults deploy
        ({"Frontend": "function-url"}, ["PublicFunctionUrlNeedsReservedConcurrency"]),
        ({"Frontend": "function-url", "ReservedConcurrency": "10"}, []),
        (
            {"Frontend": "function-url", "AuthMode": "iam"},
            [],  # signed requests only: not public, no reservation needed
        ),
        ({"AuthMode": "iam"}, ["IamAuthIsAFunctionUrlSetting"]),
        # no key, stated on purpose: anyone may embed (the rule is about the bound only)
        ({"AuthMode": "none"}, []),
        (
            {"Frontend": "function-url", "AuthMode": "none"},
            ["PublicFunctionUrlNeedsReservedConcurrency"],
        ),
    ],
)
def test_rules_refuse_open_or_unbounded_public_frontends(
    parameters: dict[str, str], expected: list[str]
) -> None:
    assert sorted(refused(**parameters)) == sorted(expected)


#: A web ACL on the stage: production's rate (samconfig.toml's prod environment).
WAF = {"WafRateLimitPerIp": "2000"}


def web_acl(**overrides: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The web ACL's properties as deployed (None when its condition is false), and the
    association's."""
    cfn = translate(overrides)
    params = parameter_defaults(cfn, **overrides)
    conditions = evaluate_conditions(cfn, params)
    (acl,) = resources_of_type(cfn, "AWS::WAFv2::WebACL").values()
    (association,) = resources_of_type(cfn, "AWS::WAFv2::WebACLAssociation").values()
    if not conditions[acl["Condition"]]:
        return None, {}
    return resolve(cfn, acl["Properties"], overrides), resolve(
        cfn, association["Properties"], overrides
    )


def test_the_default_has_no_web_acl() -> None:
    # (about $7 a month at zero traffic: production's, docs/deploy.md)
    acl, _ = web_acl()
    assert acl is None


def test_the_rest_api_stage_gets_a_web_acl_refusing_keyless_and_per_ip_floods() -> None:
    acl, association = web_acl(**WAF)
    assert acl is not None
    assert acl["Scope"] == "REGIONAL" and "Allow" in acl["DefaultAction"]
    rules = {rule["Name"]: rule for rule in acl["Rules"]}
    assert set(rules) == {"keyless-v1", "rate-per-ip"}
    keyless = rules["keyless-v1"]
    assert keyless["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 401
    (on_v1, no_token) = keyless["Statement"]["AndStatement"]["Statements"]
    assert on_v1["RegexMatchStatement"]["FieldToMatch"] == {"UriPath": {}}
    # the path as the API routes it: URL-decoded, then normalized (//v1, /x/../v1)
    transformations = on_v1["RegexMatchStatement"]["TextTransformations"]
    assert [t["Type"] for t in sorted(transformations, key=lambda t: t["Priority"])] == [
        "URL_DECODE",
        "NORMALIZE_PATH",
    ]
    regex = no_token["NotStatement"]["Statement"]["RegexMatchStatement"]
    assert regex["FieldToMatch"]["SingleHeader"]["Name"] == "authorization"
    rate = rules["rate-per-ip"]
    assert rate["Statement"]["RateBasedStatement"] == {
        "AggregateKeyType": "IP",
        "EvaluationWindowSec": 300,
        "Limit": "2000",
    }
    assert rate["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 429
    # the ACL is on the stage the API serves
    assert association["ResourceArn"].startswith("arn:aws:apigateway:us-east-1::/restapis/")
    assert association["ResourceArn"].endswith("/stages/<Ref SiglipTextApiStage>")


def test_without_api_keys_the_web_acl_only_rate_limits() -> None:
    acl, _ = web_acl(AuthMode="none", **WAF)
    assert acl is not None
    assert [rule["Name"] for rule in acl["Rules"]] == ["rate-per-ip"]


@pytest.mark.parametrize(
    "parameters",
    [
        {"WafRateLimitPerIp": "0"},
        {"Frontend": "function-url", "ReservedConcurrency": "10", **WAF},
    ],
)
def test_no_web_acl_when_turned_off_or_with_a_function_url(parameters: dict[str, str]) -> None:
    # (WAF cannot be attached to a function URL; CloudFront in front can carry one)
    acl, _ = web_acl(**parameters)
    assert acl is None


def test_the_blocked_answers_are_openai_shaped_json() -> None:
    import json

    acl, _ = web_acl(**WAF)
    assert acl is not None
    for name, body in acl["CustomResponseBodies"].items():
        assert body["ContentType"] == "APPLICATION_JSON"
        error = json.loads(body["Content"])["error"]
        assert set(error) == {"message", "type", "param", "code"}, name


def keyless_rule_blocks(path: str, authorization: str | None) -> bool:
    """What the keyless rule does to a request, as WAF evaluates it: the path through its
    transformations (URL_DECODE, then NORMALIZE_PATH: multiple slashes and dot segments
    removed), the header through LOWERCASE, the regex on the whole header (PCRE's search,
    here Python's, which agree on this pattern)."""
    acl, _ = web_acl(**WAF)
    assert acl is not None
    (rule,) = [r for r in acl["Rules"] if r["Name"] == "keyless-v1"]
    on_v1, no_token = rule["Statement"]["AndStatement"]["Statements"]
    decoded = urllib.parse.unquote(path)
    normalized = posixpath.normpath(re.sub("/+", "/", decoded)) + (
        "/" if path.endswith("/") else ""
    )
    matches_path = re.search(on_v1["RegexMatchStatement"]["RegexString"], normalized)
    regex = no_token["NotStatement"]["Statement"]["RegexMatchStatement"]["RegexString"]
    matches_token = authorization is not None and re.search(regex, authorization.lower())
    return bool(matches_path and not matches_token)


@pytest.mark.parametrize(
    ("path", "authorization", "blocked"),
    [
        ("/prod/v1/embeddings", None, True),
        ("/prod/v1/embeddings", "", True),
        ("/prod/v1/embeddings", "Bearer", True),
        ("/prod/v1/embeddings", "Bearer ", True),
        ("/prod/v1/embeddings", "Basic dXNlcjpwYXNz", True),
        ("/prod/v1/embeddings", "x", True),  # present, but not a Bearer token
        ("/prod/v1/embeddings", "Bearer two words", True),
        ("/prod/v%31/embeddings", None, True),  # encoded
        ("/prod//v1/embeddings", None, True),
        ("/prod/x/../v1/models", None, True),
        ("/prod/v1/embeddings", "Bearer sk0123456789abcdefghij0123456789abcdefghijABCDEF", False),
        ("/prod/v1/embeddings", "bearer abc.def-ghi_jkl~mno+pqr/stu=", False),
        ("/prod/health", None, False),
        ("/prod/tokenize", None, True),  # authenticated like /v1
        ("/prod/%74okenize", "Basic dXNlcjpwYXNz", True),
        ("/prod/tokenize", "Bearer sk0123456789abcdefghij0123456789abcdefghijABCDEF", False),
    ],
)
def test_the_keyless_rule_refuses_any_v1_request_without_a_well_formed_bearer_token(
    path: str, authorization: str | None, blocked: bool
) -> None:
    assert keyless_rule_blocks(path, authorization) is blocked
