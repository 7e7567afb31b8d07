"""The image build checks the bundle against its manifest, and the manifest against the sha256
pinned beside the bundle: a file changed after export, even to the same size, or changed
together with its hash in the manifest, fails the build, and so does a bundle without its pin
(handler/Dockerfile's bundle stage runs scripts/check_bundle_files.py). Builds only that
stage, on the base image already present, without network: seconds.
tests/unit/scripts/test_check_bundle_files.py checks each kind of tampering on the check itself."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.paths import ROOT
from devkit.sam_build import STANDIN_BASE
from scripts.check_bundle_files import problems, read_pin

pytestmark = [pytest.mark.slow, pytest.mark.docker]  # Docker builds

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


def tampered(bundle: Path) -> None:
    """One byte of the graph changed in place: same size, another sha256."""
    path = bundle / "text_model.onnx"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


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
    shutil.copy(DEMO.parent / "demo.sha256", tmp_path / "layers" / "bundle.sha256")
    return tmp_path


@pytest.fixture
def tag() -> Iterator[str]:
    """The image's tag, removed after the test; the test skips, saying why, where Docker
    cannot build here."""
    reason = docker_ready()
    if reason:
        pytest.skip(reason)
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
    built = build_bundle_stage(context, tag)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    assert "has the pinned sha256" in built.stdout


def test_the_image_build_fails_on_a_file_changed_together_with_its_hash_in_the_manifest(
    context: Path, tag: str
) -> None:
    # GIVEN the demo bundle's graph changed and its manifest re-hashed to match (the pin kept)
    bundle = context / "layers" / "bundle"
    tampered(bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["text_model.onnx"]["sha256"] = hashlib.sha256(
        (bundle / "text_model.onnx").read_bytes()
    ).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))
    assert problems(bundle, read_pin((context / "layers" / "bundle.sha256").read_text())) != []
    # WHEN the image is built: THEN the build fails on the manifest's pin
    built = build_bundle_stage(context, tag)
    assert built.returncode != 0, built.stdout[-2000:]
    assert "manifest.json: sha256" in built.stdout + built.stderr
    assert "the pin says" in built.stdout + built.stderr


def test_the_image_build_fails_without_the_bundle_pin(context: Path, tag: str) -> None:
    (context / "layers" / "bundle.sha256").unlink()
    built = build_bundle_stage(context, tag)
    assert built.returncode != 0, built.stdout[-2000:]
    assert "bundle.sha256" in built.stdout + built.stderr


def test_the_check_names_every_kind_of_mismatch(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO, bundle)
    pin = read_pin((DEMO.parent / "demo.sha256").read_text())
    assert problems(bundle, pin) == []
    tampered(bundle)
    (bundle / "tokenizer.json").write_bytes(b"{}")
    found = problems(bundle, pin)
    assert any(p.startswith("text_model.onnx: sha256") for p in found), found
    assert any(p.startswith("tokenizer.json: 2 bytes") for p in found), found


def test_the_image_has_no_user_and_the_project_runs_it_as_a_non_root_one() -> None:
    """No USER: Lambda runs the function as its own non-root user whatever the image says,
    and `sam local` adds its emulator in a build step that runs as the image's user, which a
    non-root USER breaks (docs/deploy.md, "Test locally"). Where the project runs the image
    itself (docs/deploy-local.md's `docker run`, the image test), it passes a non-root `--user`."""
    assert not [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("USER ")]
    local = (ROOT / "docs" / "deploy-local.md").read_text()
    runs = re.findall(r"^docker run .*$", local, re.MULTILINE)
    assert runs
    for run in runs:
        (user,) = re.findall(r"--user (\d+):\d+", run)
        assert user != "0", run
    image_test = (ROOT / "tests" / "functional" / "image" / "test_image.py").read_text()
    assert re.search(r'LAMBDA_USER = "(?!0:)\d+:\d+"', image_test)
    assert 'f"--user={LAMBDA_USER}"' in image_test
