"""The Lambda entry point in auth mode ``api-key``, its secret in moto's Secrets Manager."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from moto import mock_aws

from tests.support.aws_lambda import imported_lambda


@contextmanager
def keyed_lambda(model_dir: Path, key: str) -> Iterator[ModuleType]:
    """`siglip_text.lambda_function` imported with one API key, ``key``, in its secret."""
    patch = pytest.MonkeyPatch()
    patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with mock_aws():
            client = boto3.client("secretsmanager", region_name="us-east-1")
            arn = client.create_secret(Name="siglip-text/api-key", SecretString=key)["ARN"]
            with imported_lambda(
                model_dir, SIGLIP_AUTH_MODE="api-key", SIGLIP_API_KEY_SECRET_ARN=arn
            ) as module:
                yield module
    finally:
        patch.undo()
