"""Shared fixtures: the real demo bundle, the real ORT session, events and a Lambda context."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from siglip_text.aws.function import LambdaFunction
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import Settings, demo_model_dir, load_service, load_settings

from devkit import outcomes
from devkit.aws_lambda import LambdaContext, built_lambda
from devkit.keys import KEY
from devkit.paths import FIXTURES
from devkit.secrets_manager import SecretsServer, moto_endpoint, secrets_server
from devkit.servers import demo_server
from devkit.snapstart_emulation import criu_unavailable

#: The export extra's packages: tests marked ``export`` need them.
EXPORT_EXTRA = ("torch", "transformers", "onnx")


def pytest_configure(config: pytest.Config) -> None:
    """Where ``TEST_OUTCOMES`` names a file, what the run collected, ran and skipped is
    written there (CI runs each test once: .ci/run, devkit/outcomes.py)."""
    outcomes.pytest_configure(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``export`` skip, saying why, where the export extra is absent. Looked up
    without importing it: collection would otherwise import torch and transformers, seconds
    of every run, fast loop included."""
    missing = [name for name in EXPORT_EXTRA if importlib.util.find_spec(name) is None]
    if not missing:
        return
    skip = pytest.mark.skip(
        reason=f"needs the export extra ({', '.join(missing)} missing): "
        "pip install torch==2.13.0 -e '.[export]'"
    )
    for item in items:
        if item.get_closest_marker("export") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    return demo_model_dir()


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    """Reference ids (HF tokenizer) and vectors (PyTorch) written by make_demo_bundle.py."""
    return json.loads((FIXTURES / "demo_reference.json").read_text())


@pytest.fixture(scope="session")
def openai_schema() -> dict[str, Any]:
    return json.loads((FIXTURES / "openai-embeddings-schema.json").read_text())


@pytest.fixture(scope="session")
def settings(demo_dir: Path) -> Settings:
    # Token ids accepted: the tests of the token-id path send the demo's own ids; the default
    # (reject) has tests of its own (tests/functional/test_token_ids_refused_by_default.py).
    return load_settings(model_dir=demo_dir, ort_intra_op_threads=1, token_id_inputs="accept")


@pytest.fixture(scope="session")
def service(settings: Settings) -> EmbeddingService:
    return load_service(settings)


@pytest.fixture(scope="session")
def client(service: EmbeddingService, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(service, settings)) as test_client:
        yield test_client


@pytest.fixture
def bundle_copy(tmp_path: Path, demo_dir: Path) -> Path:
    """A writable copy of the demo bundle, to corrupt one artifact at a time.

    Its manifest records no file sizes (as a hand-assembled bundle), so that each corruption
    reaches the check it targets; the cases that test the recorded sizes write them back.
    """
    target = tmp_path / "bundle"
    shutil.copytree(demo_dir, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest.pop("files", None)
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return target


@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture(scope="module")
def lambda_module(demo_dir: Path) -> Iterator[LambdaFunction]:
    """The Lambda function built in-process on the demo bundle, auth mode none (the
    package's loggers as plain `logging` has them again after the module)."""
    with built_lambda(demo_dir) as function:
        yield function


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """A real `siglip-text serve --demo` process on a free loopback port; yields its base URL."""
    with demo_server() as base:
        yield base


@pytest.fixture
def criu() -> None:
    """Skips, naming why, where CRIU cannot checkpoint (the SnapStart emulation tests)."""
    reason = criu_unavailable()
    if reason is not None:
        pytest.skip(f"CRIU cannot checkpoint here: {reason}")


@pytest.fixture
def moto_server() -> Iterator[str]:
    """Secrets Manager (moto in server mode) on loopback, for processes the test starts."""
    pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
    with moto_endpoint() as endpoint:
        yield endpoint


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretsServer]:
    """Secrets Manager (moto in server mode, behind a relay that can hang) holding `KEY`;
    botocore's Secrets Manager endpoint is the relay."""
    pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
    with secrets_server(KEY, monkeypatch) as server:
        yield server
