"""SAM's own local commands on the project, as docs/deploy.md's "Test locally" runs them.

A copy of the SAM project with the demo bundle as layers/model (devkit/sam_build.py;
the stand-in base image, since tests have no network) is built with `sam build`, whose
images are counted (one: the function's; the pre-traffic hook is a zip). Then, with the SAM
CLI's emulator in a container of the Docker engine:

- `sam local invoke` with every file in events/ (the custom domain's with its base path): the
  JSON each prints is the function's answer, parsed (SAM exits 0 on a timeout too);
- `sam local start-api` serves the REST API's routes through the `live` alias's integration
  URI, and the README's OpenAI-client example ranks its captions as the README shows;
- `sam local start-lambda` answers boto3's Lambda client.

The commands are docs/deploy.md's, read from the page; only the ports in the copy's
samconfig.toml are free ones of this machine. SAM publishes the emulator's port to the host,
so the engine needs a bridge network (.ci/run starts one with its own bridge): without an
engine, a SAM CLI or a bridge this skips, saying which, and fails in CI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.config import Config

from devkit.aws_lambda import expected_status
from devkit.events import event_files
from devkit.openai_shapes import assert_openai_error, assert_openai_response
from devkit.paths import ROOT
from devkit.readme import output, section, snippet
from devkit.sam_build import STANDIN_BASE, project_copy, sam_executable

# SAM CLI, Docker, a container per invoke
pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.sam_cli]

DEMO = ROOT / "handler" / "siglip_text" / "demo"
IN_CI = os.environ.get("CI") == "true"
SETUP = "bash .ci/run (a Docker engine with its own bridge, the stand-in base, the SAM CLI)"
FUNCTION = "SiglipTextFunction"
CUSTOM_DOMAIN = ROOT / "events" / "custom-domain"
FIGURES: dict[str, Any] = {}


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def missing() -> str | None:
    """Why SAM's local commands cannot run here, or None."""
    if sam_executable() is None:
        return "no SAM CLI (pip install aws-sam-cli; .ci/run puts it in .sam-cli/)"
    if shutil.which("docker") is None or _docker("info", timeout=20).returncode != 0:
        return "no Docker engine"
    networks = _docker("network", "ls", "--filter", "driver=bridge", "--format", "{{.Name}}")
    if "bridge" not in networks.stdout.split():
        return (
            "the Docker engine has no bridge network (dockerd --bridge=none): SAM publishes "
            "the emulator's port to the host, which needs one (docs/deploy.md, 'Test locally')"
        )
    if _docker("image", "inspect", STANDIN_BASE).returncode != 0:
        return f"no {STANDIN_BASE} (scripts/make_standin_base_image.sh)"
    return None


REASON = missing()
if REASON:
    if IN_CI:
        pytest.fail(f"CI runs SAM's local commands: {REASON}", pytrace=False)
    pytest.skip(f"{REASON}: run {SETUP}", allow_module_level=True)


def documented_commands() -> list[list[str]]:
    """The commands of docs/deploy.md's "Test locally" block, as argument lists."""
    text = section(ROOT / "docs" / "deploy.md", "### Test locally")
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block, "docs/deploy.md 'Test locally' has no bash block"
    joined = block[1].replace("\\\n", " ")
    lines = [line.split("#", 1)[0].strip() for line in joined.splitlines()]
    return [shlex.split(line) for line in lines if line]


COMMANDS = documented_commands()


def command(*prefix: str) -> list[str]:
    (found,) = [c for c in COMMANDS if c[: len(prefix)] == list(prefix)]
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The SAM project with the demo bundle, built with `sam build` (the documented command),
    its samconfig's local ports moved to free ones."""
    project = project_copy(DEMO, tmp_path_factory.mktemp("sam-local"))
    shutil.copytree(ROOT / "events", project / "events")
    config = project / "samconfig.toml"
    text = config.read_text()
    text = re.sub(r"(?m)^port = 3000$", f"port = {free_port()}", text)
    text = re.sub(r"(?m)^port = 3001$", f"port = {free_port()}", text)
    assert text != config.read_text(), "samconfig.toml names no local ports"
    config.write_text(text)
    started = time.perf_counter()
    done = sam(command("sam", "build"), project, timeout=1800)
    FIGURES["sam_build_s"] = round(time.perf_counter() - started, 1)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    yield project
    _docker("rmi", "--force", "sigliptextfunction:latest", timeout=120)


def sam(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    sam_cli = sam_executable()
    assert sam_cli
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    return subprocess.run(
        [sam_cli, *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module", autouse=True)
def report_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[test_sam_local] {json.dumps(FIGURES)}")


def deployed_status(name: str) -> int:
    """An event's status under the template (AuthMode=none locally): as in process, except
    token ids, which the template's TokenIdInputs=reject refuses."""
    return 400 if "token-ids" in name else expected_status(name)


def answer_of(result: dict[str, Any], name: str) -> tuple[int, Any]:
    assert "statusCode" in result, f"{name}: the function failed instead of answering: {result}"
    return result["statusCode"], json.loads(result["body"])


def check_answer(name: str, status: int, body: Any) -> None:
    assert status == deployed_status(name), (name, status, body)
    if status != 200:
        assert_openai_error(body)
    elif "data" in body:
        assert_openai_response(body)
        for item in body["data"]:
            if isinstance(item["embedding"], list):
                assert abs(float(np.linalg.norm(item["embedding"])) - 1.0) < 1e-3
    else:
        assert body["model"] == json.loads((DEMO / "manifest.json").read_text())["repository"]


# --- the tests ---------------------------------------------------------------------------


def test_the_documented_steps_are_build_invoke_start_api_and_start_lambda() -> None:
    verbs = [" ".join(c[:3]) for c in COMMANDS]
    assert verbs == [
        "sam build",
        "sam local invoke",
        "sam local invoke",
        "sam local start-api",
        "sam local start-lambda",
    ], COMMANDS


def test_sam_build_builds_one_image_and_the_hook_as_a_zip(project: Path) -> None:
    built = json.loads(json.dumps(_built_template(project)))
    images = [
        name
        for name, resource in built["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and resource["Properties"].get("PackageType") == "Image"
    ]
    assert images == [FUNCTION]
    hook = built["Resources"]["DeployHookFunction"]["Properties"]
    assert "PackageType" not in hook
    assert sorted(p.name for p in (project / ".aws-sam" / "build" / hook["CodeUri"]).iterdir()) == [
        "pre_traffic.py"
    ]
    FIGURES["images_built"] = images


def test_the_managed_instances_environment_builds_one_image_of_its_own(project: Path) -> None:
    # (its own template, named by samconfig's managed-instances build section, in a copy of
    # the project so that the main build's output stays)
    other = project.parent / "managed"
    shutil.copytree(project, other, ignore=shutil.ignore_patterns(".aws-sam"))
    done = sam(["sam", "build", "--config-env", "managed-instances"], other, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    built = _built_template(other)
    functions = [
        name for name, r in built["Resources"].items() if r["Type"] == "AWS::Serverless::Function"
    ]
    assert functions == ["SiglipTextManagedFunction"]
    assert built["Resources"]["SiglipTextManagedFunction"]["Properties"]["PackageType"] == "Image"
    _docker("rmi", "--force", "sigliptextmanagedfunction:latest", timeout=120)


def _built_template(project: Path) -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    built = project / ".aws-sam" / "build" / "template.yaml"
    parsed: dict[str, Any] = yaml_parse(built.read_text())
    return parsed


def test_sam_local_invoke_answers_every_event(project: Path) -> None:
    # GIVEN the documented invocations: an event, and a custom domain's with its base path
    plain, custom = [c for c in COMMANDS if c[:3] == ["sam", "local", "invoke"]]
    event_at = plain.index("--event") + 1
    runs = [(plain, path) for path in event_files()]
    runs += [(custom, path) for path in sorted(CUSTOM_DOMAIN.glob("*.json"))]
    seconds = []
    for args, path in runs:
        args = [*args]
        args[event_at] = path.relative_to(ROOT).as_posix()
        started = time.perf_counter()
        done = sam(args, project)
        seconds.append(time.perf_counter() - started)
        # THEN each prints the function's answer (parsed: SAM exits 0 on a timeout too)
        why = f"{path.name}: no answer (exit {done.returncode}):\n{done.stderr[-3000:]}"
        assert done.stdout.strip(), why
        status, body = answer_of(json.loads(done.stdout), path.name)
        check_answer(path.name, status, body)
    FIGURES["invoke_s_median"] = round(statistics.median(seconds), 2)
    FIGURES["events_answered"] = len(runs)


class Server:
    """`sam local start-api` or `start-lambda`, stopped as Ctrl-C stops it (SIGINT: SAM
    removes its warm containers)."""

    def __init__(self, args: list[str], project: Path, section_name: str) -> None:
        text = (project / "samconfig.toml").read_text()
        table = text.split(f"[default.{section_name}.parameters]", 1)[1]
        self.port = int(re.search(r"(?m)^port = (\d+)$", table)[1])  # type: ignore[index]
        sam_cli = sam_executable()
        assert sam_cli
        self.log = (project / f"{section_name}.log").open("w")
        self.process = subprocess.Popen(
            [sam_cli, *args[1:]],
            cwd=project,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
        )
        self.logfile = project / f"{section_name}.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.logfile.read_text()[-3000:]
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.5)
        log = self.logfile.read_text()[-3000:]
        raise AssertionError(f"sam did not listen on {self.port}:\n{log}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log.close()


def test_sam_local_start_api_ranks_the_readmes_captions(project: Path) -> None:
    pytest.importorskip("openai", reason="the clients extra (openai) runs the README's example")
    server = Server(command("sam", "local", "start-api"), project, "local_start_api")
    try:
        mounted = server.logfile.read_text()
        # GIVEN the three routes, mounted on the function through the alias's integration URI
        for route in ("/v1/embeddings [POST]", "/v1/models [GET]", "/health [GET]"):
            assert f"{route}" in mounted, mounted[-3000:]
        # WHEN the README's example runs against it (base_url=http://127.0.0.1:<port>/v1)
        block = snippet("rank-captions")
        started = time.perf_counter()
        printed = _run(block.against(f"http://127.0.0.1:{server.port}"))
        FIGURES["start_api_first_request_s"] = round(time.perf_counter() - started, 2)
    finally:
        server.stop()
    # THEN it prints the README's ranking, to its printed precision
    rows = [re.fullmatch(r"\s*(-?\d+\.\d+)  (.+)", line) for line in printed.splitlines()]
    assert rows and all(rows), printed
    shown = [line.split(None, 1) for line in output("rank-captions").code.splitlines()]
    assert [row[2] for row in rows if row] == [caption for _, caption in shown]
    assert np.allclose(
        [float(row[1]) for row in rows if row], [float(score) for score, _ in shown], atol=0.0015
    )


def _run(code: str) -> str:
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md <!-- snippet: rank-captions -->", "exec"), {})  # noqa: S102
    return printed.getvalue()


def test_sam_local_start_lambda_answers_boto3(project: Path) -> None:
    server = Server(command("sam", "local", "start-lambda"), project, "local_start_lambda")
    try:
        client = boto3.client(
            "lambda",
            endpoint_url=f"http://127.0.0.1:{server.port}",
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 (SAM's emulator checks no signature)
            config=Config(read_timeout=120, retries={"max_attempts": 0}),
        )
        for name in ("rest-embeddings-text.json", "url-health.json"):
            event = (ROOT / "events" / name).read_text()
            answer = client.invoke(FunctionName=FUNCTION, Payload=event.encode())
            assert answer["StatusCode"] == 200 and "FunctionError" not in answer, answer
            status, body = answer_of(json.loads(answer["Payload"].read()), name)
            check_answer(name, status, body)
    finally:
        server.stop()


def test_sam_local_invoke_after_an_int8_export_answers_200(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from devkit.real_bundle import DIMENSION, real_bundle

    # (last in the module: its build takes the function image's tag, which the tests above
    # ran on, and removes it)
    # GIVEN "Test locally" after an export: the project with what `siglip-text export
    # --precision int8` wrote as layers/model (another model id, 768 dimensions), built
    bundle = real_bundle(tmp_path_factory).bundle
    model_id = json.loads((bundle / "manifest.json").read_text())["repository"]
    project = project_copy(bundle, tmp_path_factory.mktemp("sam-local-export"))
    shutil.copytree(ROOT / "events", project / "events")
    done = sam(command("sam", "build"), project, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    try:
        # WHEN the documented invocation runs, and the same for each frontend's events
        # (the block's first invoke: the second one is the custom domain's, with a base path)
        plain = next(c for c in COMMANDS if c[:3] == ["sam", "local", "invoke"])
        event_at = plain.index("--event") + 1
        names = [plain[event_at].removeprefix("events/")]
        names += ["http-embeddings-text.json", "url-embeddings-text.json", "rest-health.json"]
        for name in names:
            args = [*plain]
            args[event_at] = f"events/{name}"
            done = sam(args, project)
            assert done.stdout.strip(), f"{name}: no answer:\n{done.stderr[-3000:]}"
            # THEN each answers as with the demo: 200, the exported model's id and width
            status, body = answer_of(json.loads(done.stdout), name)
            assert status == 200, (name, body)
            assert body["model"] == model_id, name
            if "data" in body:
                assert_openai_response(body)
                assert len(body["data"][0]["embedding"]) == DIMENSION, name
    finally:
        _docker("rmi", "--force", "sigliptextfunction:latest", timeout=120)
