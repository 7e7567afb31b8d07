"""The image build checks the bundle against its manifest: a file changed after export, even
to the same size, fails the build (handler/Dockerfile's bundle stage runs
scripts/check_bundle_files.py). Builds only that stage, on the base image already
present, without network: seconds."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bundles import tampered
from tests.support.paths import ROOT
from tests.support.sam_build import STANDIN_BASE

pytestmark = pytest.mark.slow  # Docker builds

DOCKERFILE = ROOT / "handler" / "Dockerfile"
DEMO = ROOT / "handler" / "siglip_text" / "demo"
#: The base the build is given: the one here (scripts/make_standin_base_image.sh makes a
#: stand-in where AWS's cannot be pulled), not the Dockerfile's digest-pinned default.
BASE_IMAGE = STANDIN_BASE


def docker_ready() -> str | None:
    """Why the Docker builds cannot run here, or None."""
    if shutil.which("docker") is None:
        return "no docker command"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return "no Docker engine on the default socket"
    image = subprocess.run(
        ["docker", "image", "inspect", BASE_IMAGE], capture_output=True, timeout=60
    )
    if image.returncode != 0:
        return f"the base image {BASE_IMAGE} is not here (scripts/make_standin_base_image.sh)"
    return None


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A build context holding what the bundle stage copies: the check and a demo bundle."""
    (tmp_path / "handler").mkdir()
    (tmp_path / "scripts").mkdir()
    shutil.copy(DOCKERFILE, tmp_path / "handler" / "Dockerfile")
    shutil.copy(
        ROOT / "scripts" / "check_bundle_files.py", tmp_path / "scripts" / "check_bundle_files.py"
    )
    shutil.copytree(DEMO, tmp_path / "layers" / "bundle")
    return tmp_path


@pytest.fixture
def tag() -> Iterator[str]:
    name = f"siglip-text:bundle-check-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["docker", "rmi", "-f", name], capture_output=True, timeout=120)


def build_bundle_stage(context: Path, tag: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "docker", "build", "--network", "none", "--target", "bundle",
            "-f", "handler/Dockerfile", "--build-arg", "MODEL_DIR=layers/bundle",
            "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", tag, ".",
        ],
        cwd=context, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_image_build_fails_on_a_bundle_file_changed_to_the_same_size(
    context: Path, tag: str
) -> None:
    reason = docker_ready()
    if reason:
        pytest.skip(reason)
    # GIVEN the demo bundle with one byte of its graph changed (its size unchanged)
    bundle = context / "layers" / "bundle"
    size = (bundle / "text_model.onnx").stat().st_size
    tampered(bundle)
    assert (bundle / "text_model.onnx").stat().st_size == size
    # WHEN the image is built: THEN the build fails, naming the file and the mismatch
    built = build_bundle_stage(context, tag)
    assert built.returncode != 0, built.stdout[-2000:]
    assert "text_model.onnx: sha256" in built.stdout + built.stderr


def test_the_image_build_passes_an_intact_bundle(context: Path, tag: str) -> None:
    reason = docker_ready()
    if reason:
        pytest.skip(reason)
    built = build_bundle_stage(context, tag)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    assert "every recorded file" in built.stdout


def test_the_image_runs_as_a_non_root_user_by_default() -> None:
    """Outside Lambda too (docker run, ECS): the last USER of the final stage is not root."""
    users = [
        line.split(None, 1)[1].strip()
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("USER ")
    ]
    assert users, "the image runs as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users
