"""`sam build` itself, on a copy of the repository's SAM project, offline.

The copy holds what the build reads (template.yaml, samconfig.toml, .dockerignore,
handler/, the dependency lock) and the bundle under test as layers/model, the only bundle the
template builds. One line differs from the repository: the Build mapping's BaseImage, the
digest-pinned AWS base image, becomes the local stand-in of
scripts/make_standin_base_image.sh (tests have no network, and a locally built image has no
registry digest). The SAM CLI then builds every image function with Docker's classic
builder (docker-py, the platform from the mapping's Architecture), whose dependency layer
comes from the cache that .ci/run's networked `docker build` filled.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devkit.paths import ROOT

#: The SAM templates of the project: the function (and its hook), Managed Instances.
TEMPLATES = ("template.yaml", "template-managed-instances.yaml")
#: The stand-in base image's tag (scripts/make_standin_base_image.sh).
STANDIN_BASE = "public.ecr.aws/lambda/python:3.13"
_BASE_LINE = re.compile(r"^(\s+BaseImage:\s*)(\S+)$", re.MULTILINE)


#: Where .ci/run installs the SAM CLI: a virtual environment of its own, as it pins a click
#: older than the one the project's tools (import-linter) need.
SAM_CLI_VENV = ROOT / ".sam-cli"
PROBE = Path(__file__).with_name("samcli_probe.py")


def sam_executable() -> str | None:
    """The SAM CLI: $SIGLIP_SAM_CLI, .ci/run's .sam-cli/, beside this Python, or on PATH."""
    for candidate in (
        os.environ.get("SIGLIP_SAM_CLI"),
        str(SAM_CLI_VENV / "bin" / "sam"),
        str(Path(sys.executable).with_name("sam")),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("sam")


def sam_python() -> str | None:
    """The Python the SAM CLI runs with (its script's interpreter line)."""
    sam = sam_executable()
    if sam is None:
        return None
    first = Path(sam).read_bytes()[:512].split(b"\n", 1)[0].decode(errors="replace")
    if first.startswith("#!") and "python" in first:
        return first[2:].strip().split()[0]
    beside = Path(sam).with_name("python")
    return str(beside) if beside.exists() else None


def samcli_probe(request: dict[str, Any]) -> Any:
    """The SAM CLI's own answer to `request` (devkit/samcli_probe.py)."""
    python = sam_python()
    assert python, "no SAM CLI: python3 -m venv .sam-cli && .sam-cli/bin/pip install aws-sam-cli"
    done = subprocess.run(
        [python, str(PROBE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def copy_bundle(bundle: Path, dest: Path, **copytree: Any) -> None:
    """`bundle` copied to `dest`, with its pin beside it (``dest.sha256``, what the image build
    checks the manifest against): the bundle's own pin when export wrote one, else one made
    here for the bundle as it is (a bundle a test made)."""
    shutil.copytree(bundle, dest, **copytree)
    pin = bundle.with_name(bundle.name + ".sha256")
    if pin.is_file():
        shutil.copy2(pin, dest.with_name(dest.name + ".sha256"))
    else:
        digest = hashlib.sha256((dest / "manifest.json").read_bytes()).hexdigest()
        dest.with_name(dest.name + ".sha256").write_text(f"{digest}  manifest.json\n")


def project_copy(bundle: Path, where: Path, base_image: str = STANDIN_BASE) -> Path:
    """The repository's SAM project in `where`, `bundle` as its layers/model."""
    project = where / "sam-project"
    shutil.copytree(
        ROOT / "handler" / "siglip_text",
        project / "handler" / "siglip_text",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    shutil.copy2(ROOT / "handler" / "Dockerfile", project / "handler" / "Dockerfile")
    shutil.copytree(
        ROOT / "handler" / "deploy_hook",
        project / "handler" / "deploy_hook",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    (project / "layers" / "python").mkdir(parents=True)
    shutil.copy2(ROOT / "layers" / "python" / "requirements.txt", project / "layers" / "python")
    copy_bundle(bundle, project / "layers" / "model", ignore=shutil.ignore_patterns("*.py"))
    (project / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "check_bundle_files.py", project / "scripts")
    for name in ("samconfig.toml", ".dockerignore"):
        shutil.copy2(ROOT / name, project / name)
    for name in TEMPLATES:
        template = (ROOT / name).read_text()
        swapped, count = _BASE_LINE.subn(lambda m: m.group(1) + base_image, template)
        assert count == 1, f"{name}'s Build mapping should name one BaseImage"
        (project / name).write_text(swapped)
    return project


@dataclass
class SamBuild:
    output: str
    #: logical id of each image function -> the image id `sam build` left for it
    images: dict[str, str]


def sam_build(project: Path, timeout: float = 1800) -> SamBuild:
    """Run `sam build` in `project`; each image function's built image, by id."""
    sam = sam_executable()
    assert sam, "no SAM CLI: pip install aws-sam-cli (.ci/run does)"
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    done = subprocess.run(
        [sam, "build"], cwd=project, capture_output=True, text=True, timeout=timeout, env=env
    )
    output = done.stdout + done.stderr
    hint = (
        " (the dependency layer is not cached and tests have no network: run .ci/run)"
        if "Retrying" in output
        else ""
    )
    assert done.returncode == 0, f"sam build failed{hint}:\n{output[-4000:]}"
    built = yaml.safe_load((project / ".aws-sam" / "build" / "template.yaml").read_text())
    images = {}
    for logical_id, resource in built["Resources"].items():
        properties = resource.get("Properties") or {}
        if resource["Type"] == "AWS::Serverless::Function" and "ImageUri" in properties:
            inspected = subprocess.run(
                ["docker", "image", "inspect", "--format={{json .Id}}", properties["ImageUri"]],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert inspected.returncode == 0, inspected.stderr
            images[logical_id] = json.loads(inspected.stdout)
    return SamBuild(output=output, images=images)


def tagged(image_id: str, prefix: str = "siglip-text-test") -> str:
    """A tag of this test's own on a built image (`sam build` tags <function>:latest, which
    another build on the same engine may move)."""
    tag = f"{prefix}:{uuid.uuid4().hex[:12]}"
    done = subprocess.run(["docker", "tag", image_id, tag], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return tag
