"""What the served function may do with the API key secret, on the template as AWS's SAM
translator makes it and CloudFormation resolves it: read its value (the keys) and describe it
(a SnapStart init checks the secret with DescribeSecret, never reading its value), on that one
secret only, and nothing at all without api-key auth.

DescribeSecret needs ``secretsmanager:DescribeSecret`` (AWS CLI Command Reference,
"describe-secret"); SAM's ``AWSSecretsManagerGetSecretValuePolicy`` grants only
``secretsmanager:GetSecretValue``.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkit.sam import resolve, translate


def secret_statements(parameters: dict[str, str]) -> list[dict[str, Any]]:
    """The served function role's statements that name a Secrets Manager action."""
    cfn = translate(parameters)
    policies = resolve(cfn, cfn["Resources"]["SiglipTextFunctionRole"]["Properties"], parameters)
    statements = [
        statement
        for policy in policies.get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    return [
        s
        for s in statements
        if any(str(a).startswith("secretsmanager:") for a in _as_list(s["Action"]))
    ]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("snapstart", ["None", "PublishedVersions"])
def test_under_api_key_the_function_may_read_and_describe_its_secret_only(snapstart: str) -> None:
    statements = secret_statements({"AuthMode": "api-key", "SnapStart": snapstart})
    granted = {
        (action, statement["Resource"])
        for statement in statements
        for action in _as_list(statement["Action"])
    }
    assert all(statement["Effect"] == "Allow" for statement in statements)
    assert granted == {
        ("secretsmanager:GetSecretValue", "<Ref ApiKeySecret>"),
        ("secretsmanager:DescribeSecret", "<Ref ApiKeySecret>"),
    }


def test_without_api_key_auth_the_function_may_do_nothing_with_secrets() -> None:
    assert secret_statements({"AuthMode": "none"}) == []
