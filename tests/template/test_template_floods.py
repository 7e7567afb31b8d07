"""template.yaml against floods and open doors, evaluated on the template the SAM transform
makes (devkit/sam.py), as CloudFormation evaluates it on deploy: the Rules that refuse
a public function URL without a reservation and an unauthenticated public frontend, and the
AWS WAF web ACL before the REST API's stage."""

from __future__ import annotations

from typing import Any

import pytest

from devkit.deployment import evaluate_conditions, parameter_defaults
from devkit.sam import resolve, resources_of_type, translate
from tests.support.rules import refusals


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
            {"Frontend": "function-url", "FunctionUrlAuthType": "AWS_IAM", "AuthMode": "none"},
            [],  # signed requests only: not public, no reservation needed
        ),
        ({"AuthMode": "none"}, ["UnauthenticatedPublicFrontendNeedsAcknowledgement"]),
        ({"AuthMode": "none", "AcknowledgeUnauthenticated": "true"}, []),
        (
            {"Frontend": "function-url", "AuthMode": "none", "ReservedConcurrency": "10"},
            ["UnauthenticatedPublicFrontendNeedsAcknowledgement"],
        ),
        (
            {"Frontend": "function-url", "AuthMode": "none"},
            [
                "PublicFunctionUrlNeedsReservedConcurrency",
                "UnauthenticatedPublicFrontendNeedsAcknowledgement",
            ],
        ),
    ],
)
def test_rules_refuse_open_or_unbounded_public_frontends(
    parameters: dict[str, str], expected: list[str]
) -> None:
    assert sorted(refused(**parameters)) == sorted(expected)


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


def test_the_rest_api_stage_gets_a_web_acl_refusing_keyless_and_per_ip_floods() -> None:
    acl, association = web_acl()
    assert acl is not None
    assert acl["Scope"] == "REGIONAL" and "Allow" in acl["DefaultAction"]
    rules = {rule["Name"]: rule for rule in acl["Rules"]}
    assert set(rules) == {"keyless-v1", "rate-per-ip"}
    keyless = rules["keyless-v1"]
    assert keyless["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 401
    (on_v1, no_header) = keyless["Statement"]["AndStatement"]["Statements"]
    assert on_v1["ByteMatchStatement"]["SearchString"] == "/v1/"
    size = no_header["NotStatement"]["Statement"]["SizeConstraintStatement"]
    assert size["FieldToMatch"]["SingleHeader"]["Name"] == "authorization"
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
    acl, _ = web_acl(AuthMode="none", AcknowledgeUnauthenticated="true")
    assert acl is not None
    assert [rule["Name"] for rule in acl["Rules"]] == ["rate-per-ip"]


@pytest.mark.parametrize(
    "parameters",
    [{"WafRateLimitPerIp": "0"}, {"Frontend": "function-url", "ReservedConcurrency": "10"}],
)
def test_no_web_acl_when_turned_off_or_with_a_function_url(parameters: dict[str, str]) -> None:
    # (WAF cannot be attached to a function URL; CloudFront in front can carry one)
    acl, _ = web_acl(**parameters)
    assert acl is None


def test_the_blocked_answers_are_openai_shaped_json() -> None:
    import json

    acl, _ = web_acl()
    assert acl is not None
    for name, body in acl["CustomResponseBodies"].items():
        assert body["ContentType"] == "APPLICATION_JSON"
        error = json.loads(body["Content"])["error"]
        assert set(error) == {"message", "type", "param", "code"}, name
