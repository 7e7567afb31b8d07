"""The function image, built by `sam build` from template.yaml and run as AWS Lambda runs it.

The SAM CLI builds the template's image functions (handler/Dockerfile, unchanged) from a copy
of the project whose layers/model is the bundle under test, on the stand-in base image of
scripts/make_standin_base_image.sh (AWS's runtime interface client and emulator on Debian),
devkit/sam_build.py; the other bundles (a private one, an exported one, a corrupted
one) are built with `docker build --network none` and the template's build arguments. .ci/run
makes the stand-in and builds the function image once with network, so that the builds here
change only the bundle and code layers and need no network. Each image then runs
``--read-only --tmpfs /tmp --user 993:990 --network none`` with the template's environment
(AuthMode=none: no Secrets Manager here), and every file in events/ goes to the Runtime
Interface Emulator from inside the container (``docker exec``), never through a network: each
gets the status and body the in-process handler gives, and no query text reaches the logs. A
corrupted bundle fails init through the runtime with its message; a bundle readable only by
its owner (0600, an export under umask 077) still serves.

Where no Docker engine runs, the same checks run on the host instead: the lock installed with
``pip --target`` from .wheelhouse/, AWS's runtime interface client (``python -m awslambdaric``)
behind the emulator, both prepared by .ci/run in .lambda-runtime/. That path exercises neither
the Dockerfile nor the base image nor file modes, and says so.

Init and warm figures are printed (never asserted): ``INIT REPORT`` from the emulator, and the
round trip of warm invokes inside the container.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from devkit.aws_lambda import LambdaContext, built_lambda, expected_status
from devkit.events import event_files, for_model, request_texts
from devkit.openai_shapes import assert_openai_error, assert_openai_response, decode_base64
from devkit.paths import ROOT
from devkit.sam import resolve, source_template, translate
from devkit.sam_build import (
    STANDIN_BASE,
    copy_bundle,
    project_copy,
    sam_build,
    sam_executable,
    tagged,
)

pytestmark = [pytest.mark.slow, pytest.mark.docker]  # the function image


DOCKERFILE = ROOT / "handler" / "Dockerfile"
DEMO = ROOT / "handler" / "siglip_text" / "demo"
REQUIREMENTS = ROOT / "layers" / "python" / "requirements.txt"
WHEELHOUSE = ROOT / ".wheelhouse"
LAMBDA_RUNTIME = ROOT / ".lambda-runtime"
HANDLER = "siglip_text.lambda_function.handler"
#: Lambda's own user is not root; any uid/gid without a passwd entry does (993:990 on Lambda).
LAMBDA_USER = "993:990"
LAMBDA_HOME = "/home/sbx_user1051"
SETUP = "bash .ci/run (or scripts/make_standin_base_image.sh and one networked docker build)"
IN_CI = os.environ.get("CI") == "true"
WARM_INVOKES = 20

#: Sends events (a JSON list of raw event strings on stdin) to the emulator inside the
#: container, each `repeat` times, and prints each response with its round trip.
INVOKE = """
import json, sys, time, urllib.error, urllib.request
URL = "http://127.0.0.1:8080/2015-03-31/functions/function/invocations"
repeat = int(sys.argv[1])
results, deadline = [], time.monotonic() + 30
for body in json.load(sys.stdin):
    for _ in range(repeat):
        while True:
            request = urllib.request.Request(URL, data=body.encode(), method="POST")
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=600) as response:
                    raw, status = response.read().decode(), response.status
                break
            except urllib.error.HTTPError as error:  # the emulator's answer to a failed init
                raw, status = error.read().decode(), error.code
                break
            except urllib.error.URLError as error:
                refused = isinstance(error.reason, ConnectionRefusedError)
                if time.monotonic() > deadline or not refused:
                    raise
                time.sleep(0.05)
        results.append({"seconds": time.perf_counter() - start, "response": raw, "status": status})
print(json.dumps(results))
"""


def _docker(
    *args: str, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


def _docker_runs() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


DOCKER = _docker_runs()
HOST_FALLBACK = (LAMBDA_RUNTIME / "aws-lambda-rie").is_file() and WHEELHOUSE.is_dir()
if not DOCKER and not HOST_FALLBACK and not IN_CI:
    pytest.skip(
        f"no Docker engine, and no .lambda-runtime/ for the host fallback: run {SETUP}",
        allow_module_level=True,
    )


def function_environment() -> dict[str, str]:
    """The function's environment as the template deploys it, with AuthMode=none."""
    parameters = {"AuthMode": "none"}
    cfn = translate(parameters)
    function = cfn["Resources"]["SiglipTextFunction"]
    variables = resolve(cfn, function["Properties"]["Environment"]["Variables"], parameters)
    return {name: str(value) for name, value in variables.items()}


# --- the two ways to run the function ----------------------------------------------------


class Function(Protocol):
    def invoke(self, events: list[str], repeat: int = 1) -> list[dict[str, Any]]: ...
    def logs(self) -> str: ...


@dataclass
class Container:
    """The image running as Lambda runs it: read-only, non-root, no network."""

    image: str
    env: dict[str, str]
    id: str = ""
    #: linux/arm64 under qemu-user (binfmt_misc): a Neoverse N1 /proc/cpuinfo is mounted,
    #: as onnxruntime's import crashes on the host's x86 text (docs/cpus.md)
    platform: str | None = None

    def __enter__(self) -> Container:
        flags = [f"--env={name}={value}" for name, value in self.env.items()]
        if self.platform:
            # No --platform: the legacy builder labels the image with the daemon's architecture
            # (build_image); binfmt_misc runs its aarch64 programs all the same.
            flags += [f"--volume={N1_CPUINFO}:/proc/cpuinfo:ro"]
        done = _docker(
            "run", "--detach", "--network=none", "--read-only", "--tmpfs=/tmp",
            f"--tmpfs={LAMBDA_HOME}", f"--env=HOME={LAMBDA_HOME}", f"--user={LAMBDA_USER}",
            *flags, self.image, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.id = done.stdout.strip()
        return self

    def __exit__(self, *_: object) -> None:
        _docker("rm", "--force", self.id, timeout=60)

    def invoke(self, events: list[str], repeat: int = 1) -> list[dict[str, Any]]:
        done = _docker(
            "exec", "--interactive", self.id, "python3", "-c", INVOKE, str(repeat),
            stdin=json.dumps(events), timeout=300 if self.platform is None else 1800,
        )  # fmt: skip
        assert done.returncode == 0, f"{done.stderr[-3000:]}\n{self.logs()[-3000:]}"
        results: list[dict[str, Any]] = json.loads(done.stdout)
        return results

    def logs(self) -> str:
        done = _docker("logs", self.id, timeout=60)
        return done.stdout + done.stderr

    def home_files(self) -> list[str]:
        done = _docker("exec", self.id, "find", LAMBDA_HOME, "-mindepth", "1", timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HostProcess:
    """The fallback: the emulator and `python -S -m awslambdaric` on this machine, the
    function's files in `root` laid out as in the image, only the test's directories writable."""

    root: Path
    bundle: Path
    env: dict[str, str]
    work: Path
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HostProcess:
        (self.work / "home").mkdir(parents=True)
        (self.work / "tmp").mkdir()
        self.log = (self.work / "log.txt").open("wb")
        env = {
            **self.env,
            "SIGLIP_MODEL_DIR": str(self.bundle),
            "ORT_DISABLE_TELEMETRY": "1",
            "LAMBDA_TASK_ROOT": str(self.root / "var" / "task"),
            "PYTHONPATH": str(self.root / "var" / "runtime"),
            "HOME": str(self.work / "home"),
            "TMPDIR": str(self.work / "tmp"),
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        self.process = subprocess.Popen(
            [
                str(LAMBDA_RUNTIME / "aws-lambda-rie"),
                "--runtime-interface-emulator-address", f"127.0.0.1:{self.port}",
                "--runtime-api-address", f"127.0.0.1:{_free_port()}",
                sys.executable, "-S", "-m", "awslambdaric", HANDLER,
            ],
            cwd=self.root / "var" / "task", env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()

    def invoke(self, events: list[str], repeat: int = 1) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/2015-03-31/functions/function/invocations"
        results, deadline = [], time.monotonic() + 30
        for body in events:
            for _ in range(repeat):
                while True:
                    start = time.perf_counter()
                    try:
                        request = urllib.request.Request(url, data=body.encode(), method="POST")
                        with urllib.request.urlopen(request, timeout=120) as response:
                            raw, status = response.read().decode(), response.status
                        break
                    except urllib.error.HTTPError as error:
                        raw, status = error.read().decode(), error.code
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
                results.append(
                    {"seconds": time.perf_counter() - start, "response": raw, "status": status}
                )
        return results

    def logs(self) -> str:
        self.log.flush()
        return (self.work / "log.txt").read_text(errors="replace")

    def home_files(self) -> list[str]:
        return [str(p) for p in (self.work / "home").rglob("*")]


# --- building ----------------------------------------------------------------------------


def _context_with(bundle: Path, tmp: Path) -> tuple[Path, str]:
    """A build context like the repository's (package, lock, .dockerignore) with `bundle`
    as layers/model (the only bundle .dockerignore lets in), its files' modes kept."""
    context = tmp / "context"
    shutil.copytree(
        ROOT / "handler" / "siglip_text",
        context / "handler" / "siglip_text",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    (context / "layers" / "python").mkdir(parents=True)
    shutil.copy2(REQUIREMENTS, context / "layers" / "python" / REQUIREMENTS.name)
    shutil.copy2(ROOT / ".dockerignore", context / ".dockerignore")
    copy_bundle(bundle, context / "layers" / "model")
    shutil.copystat(bundle, context / "layers" / "model")
    (context / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "check_bundle_files.py", context / "scripts")
    return context, "layers/model"


def build_arguments(model_dir: str) -> dict[str, str]:
    """The build arguments `sam build` passes (the template's DockerBuildArgs), on the
    stand-in base (the template pins AWS's by digest), for a bundle."""
    function = source_template()["Resources"]["SiglipTextFunction"]
    args = resolve(source_template(), function["Metadata"]["DockerBuildArgs"], {})
    assert "@sha256:" in args["BASE_IMAGE"]
    return {
        **{k: str(v) for k, v in args.items()},
        "BASE_IMAGE": STANDIN_BASE,
        "MODEL_DIR": model_dir,
    }


def build_image(context: Path, model_dir: str, *, arch: str | None = None) -> str:
    """handler/Dockerfile built offline; the dependency layer must come from the cache.
    ``arch="arm64"``: for linux/arm64, on the base image's ``3.13-arm64`` tag."""
    tag = f"siglip-text-test:{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    arguments = build_arguments(model_dir)
    if arch:
        # The base tag is the architecture: Docker's legacy builder given --platform looks its
        # intermediate images up for that platform and finds none (it records them as the
        # daemon's own), so the build follows the base image instead.
        arguments["BASE_IMAGE"] = f"{STANDIN_BASE}-{arch}"
    args = [f"--build-arg={k}={v}" for k, v in arguments.items()]
    done = _docker(
        "build", "--network=none", f"--file={DOCKERFILE}", *args, f"--tag={tag}",
        str(context), timeout=1800,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "were not consumed" not in output, f"the Dockerfile ignores a build argument:\n{output}"
    hint = (
        f" (the dependency layer is not cached and tests have no network: run {SETUP})"
        if "pip install" in output or "Retrying" in output
        else ""
    )
    assert done.returncode == 0, f"docker build failed{hint}:\n{output[-4000:]}"
    FIGURES.setdefault("build_s", []).append(round(time.perf_counter() - started, 1))
    return tag


def build_with_sam(bundle: Path, tmp: Path) -> str:
    """`sam build` of the project with `bundle` as layers/model: the served function's image,
    the only image the template builds (the pre-traffic hook is a zip)."""
    if sam_executable() is None:
        if IN_CI:
            pytest.fail("no SAM CLI: .ci/run installs aws-sam-cli")
        pytest.skip("no SAM CLI (pip install aws-sam-cli): `sam build` cannot run")
    started = time.perf_counter()
    result = sam_build(project_copy(bundle, tmp))
    FIGURES.setdefault("sam_build_s", []).append(round(time.perf_counter() - started, 1))
    assert "were not consumed" not in result.output, result.output[-3000:]
    # sam build builds every function, whatever the conditions deploy: one image
    assert set(result.images) == {"SiglipTextFunction"}, result.images
    return tagged(result.images["SiglipTextFunction"])


ARM64_BASE = "public.ecr.aws/lambda/python:3.13-arm64"
#: What .ci/run builds once with network, so that the test's offline build hits its cache.
ARM64_PREBUILT = "siglip-text:demo-arm64"
N1_CPUINFO = ROOT / "handler" / "siglip_text" / "tools" / "cpuinfo-neoverse-n1.txt"


def arm64_missing() -> str | None:
    """Why the arm64 image cannot run here, or None."""
    if not DOCKER:
        return "no Docker engine"
    entries = Path("/proc/sys/fs/binfmt_misc")
    registered = [p for p in entries.glob("*aarch64*") if "enabled" in p.read_text()]
    if not registered:
        return (
            "no binfmt_misc entry for aarch64 (mount binfmt_misc and register "
            "qemu-aarch64-static with the F flag: .ci/run does)"
        )
    if _docker("image", "inspect", ARM64_BASE, timeout=60).returncode != 0:
        return f"no {ARM64_BASE} (SIGLIP_IMAGE_ARCH=arm64 scripts/make_standin_base_image.sh)"
    if _docker("image", "inspect", ARM64_PREBUILT, timeout=60).returncode != 0:
        # Tests have no network: the dependency layer comes from .ci/run's networked build.
        return f"no {ARM64_PREBUILT}: .ci/run's networked arm64 build did not succeed"
    return None


@pytest.fixture(scope="module")
def built() -> Iterator[list[str]]:
    tags: list[str] = []
    yield tags
    if tags:
        _docker("rmi", "--force", *tags, timeout=120)


@pytest.fixture(scope="module")
def host_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fallback's image root: the lock with `pip --target` (what the Dockerfile's RUN
    does, from local wheels), awslambdaric in var/runtime, the package in var/task."""
    assert WHEELHOUSE.is_dir() and (LAMBDA_RUNTIME / "wheels").is_dir(), f"run {SETUP}"
    root = tmp_path_factory.mktemp("image")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--only-binary=:all:"]
    lock = ["--find-links", str(WHEELHOUSE), "--require-hashes", "--no-deps"]
    lock += ["-r", str(REQUIREMENTS)]
    runtime = ["--find-links", str(LAMBDA_RUNTIME / "wheels"), "awslambdaric"]
    for target, args in ((root / "var" / "task", lock), (root / "var" / "runtime", runtime)):
        done = subprocess.run(
            [*pip, "--target", str(target), *args], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
    shutil.copytree(
        ROOT / "handler" / "siglip_text",
        root / "var" / "task" / "siglip_text",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tools"),
    )
    return root


@pytest.fixture
def run_bundle(built: list[str], request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Start the function on a bundle (in the image built with it, or on the host)."""

    assert DOCKER or HOST_FALLBACK, f"no Docker engine and no host fallback: run {SETUP}"

    def start(bundle: Path, *, by_sam: bool = False) -> Container | HostProcess:
        env = function_environment()
        if DOCKER:
            if by_sam:
                tag = build_with_sam(bundle, tmp_path)
            else:
                context, model_dir = _context_with(bundle, tmp_path)
                tag = build_image(context, model_dir)
            built.append(tag)
            return Container(tag, env)
        root = request.getfixturevalue("host_root")
        return HostProcess(root, bundle, env, tmp_path / f"run-{uuid.uuid4().hex[:8]}")

    return start


# --- what a response is ------------------------------------------------------------------


def _parsed(result: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    assert "statusCode" in result, f"the function failed instead of answering: {result}"
    body = result["body"]
    if result.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    return result["statusCode"], headers, json.loads(body)


def _vector(embedding: Any) -> np.ndarray:
    return decode_base64(embedding) if isinstance(embedding, str) else np.asarray(embedding)


def deployed_status(name: str) -> int:
    """An event's status under the template's environment: as in process, except token ids,
    which its default TokenIdInputs=reject refuses."""
    return 400 if "token-ids" in name else expected_status(name)


def assert_same_answer(name: str, got: dict[str, Any], expected: dict[str, Any]) -> None:
    """The function's answer in the image is the in-process handler's (vectors to float
    tolerance; versions and init timings of /health aside)."""
    status, headers, body = _parsed(got)
    want_status, want_headers, want = _parsed(expected)
    assert status == want_status == deployed_status(name), (name, body)
    assert headers["content-type"] == want_headers["content-type"], name
    if status != 200:
        assert_openai_error(body)
        assert body == want, name
    elif "data" in body:
        assert_openai_response(body)
        for item, want_item in zip(body["data"], want["data"], strict=True):
            np.testing.assert_allclose(
                _vector(item["embedding"]), _vector(want_item["embedding"]), atol=1e-5
            )
        assert {k: v for k, v in body.items() if k != "data"} == {
            k: v for k, v in want.items() if k != "data"
        }
    else:
        # The inputs bound's time side follows the pace this CPU's probe measured (emulated
        # arm64 is slower than the host): the environment's own, as the init timings are.
        aside = {"init", "runtime", "intra_op_threads", "max_inputs_per_request"}
        if "max_inputs_per_request" in want:
            assert 1 <= body["max_inputs_per_request"] <= 2048, name  # OpenAI's own limit
        assert {k: v for k, v in body.items() if k not in aside} == {
            k: v for k, v in want.items() if k not in aside
        }


def _in_process(bundle: Path, events: list[str]) -> list[dict[str, Any]]:
    env = {k: v for k, v in function_environment().items() if k != "SIGLIP_MODEL_DIR"}
    with built_lambda(bundle, **env) as module:
        return [module.handler(json.loads(event), LambdaContext()) for event in events]


def _init_ms(logs: str) -> float:
    found = re.findall(r"INIT REPORT\(durationMs: ([0-9.]+)\)", logs)
    assert found, logs[-3000:]
    return float(found[0])


FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def report_figures(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    mode = (
        "docker"
        if DOCKER
        else (
            "NO DOCKER ENGINE: the checks ran on the host (pip --target + python -m awslambdaric "
            "behind the emulator); handler/Dockerfile was not built"
        )
    )
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n[test_image] {mode}: {json.dumps(FIGURES)}")


def serves_every_event(function: Container | HostProcess, bundle: Path, label: str) -> None:
    files = event_files()
    model_id = json.loads((bundle / "manifest.json").read_text())["repository"]
    events = [json.dumps(for_model(json.loads(path.read_text()), model_id)) for path in files]
    expected = _in_process(bundle, events)
    results = function.invoke(events)
    for path, result, want in zip(files, results, expected, strict=True):
        assert_same_answer(path.name, json.loads(result["response"]), want)
    # warm: the same embeddings request, again and again (round trip through the emulator)
    warm_event = next(e for p, e in zip(files, events, strict=True) if "embeddings-text" in p.name)
    warm = [r["seconds"] * 1000 for r in function.invoke([warm_event], repeat=WARM_INVOKES)]
    logs = function.logs()
    FIGURES[label] = {
        "init_ms": _init_ms(logs),
        "warm_ms_median": round(statistics.median(warm), 2),
        "warm_ms_p90": round(sorted(warm)[int(0.9 * len(warm)) - 1], 2),
    }
    # the logs are the runtime's and the app's JSON lines, never a query text
    for event in events:
        for text in request_texts(json.loads(event)):
            if len(text) >= 4:
                assert text not in logs, f"query text {text!r} reached the logs"
    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any(r.get("message") == "model loaded" for r in records), logs[-3000:]
    assert function.home_files() == [], "the function wrote under HOME"


# --- the tests ---------------------------------------------------------------------------


def test_demo_image_serves_every_event_read_only_as_a_non_root_user(run_bundle: Any) -> None:
    # GIVEN the image `sam build` makes of the project with the demo bundle as layers/model
    with run_bundle(DEMO, by_sam=True) as function:
        # WHEN every event is sent to the emulator in the container THEN each gets its answer
        serves_every_event(function, DEMO, "demo")
    if DOCKER:
        assert_image_is_what_the_template_runs(function.image)


@pytest.mark.slow
def test_arm64_demo_image_serves_every_event_on_a_neoverse_n1(built: list[str]) -> None:
    reason = arm64_missing()
    if reason:
        # .ci/run builds it where it can and says so when it cannot (emulated, long).
        pytest.skip(reason)
    # GIVEN the image built for linux/arm64 from the repository with the demo bundle
    tag = build_image(ROOT, DEMO.relative_to(ROOT).as_posix(), arch="arm64")
    built.append(tag)
    image = _inspect(tag)
    # (its recorded Architecture is the daemon's: the legacy builder's; `uname -m` below checks)
    FIGURES["image_mb_arm64"] = round(image["Size"] / 1e6, 1)
    # WHEN it runs under qemu-aarch64 (Graviton2's cpuinfo) behind the arm64 RIE
    # THEN every event gets the in-process handler's answer (computed on this machine)
    started = time.perf_counter()
    with Container(tag, function_environment(), platform="linux/arm64") as function:
        serves_every_event(function, DEMO, "demo-arm64-emulated")
        arch = _docker("exec", function.id, "uname", "-m", timeout=120).stdout.strip()
    assert arch == "aarch64"
    FIGURES["arm64_emulated_s"] = round(time.perf_counter() - started, 1)


def _inspect(tag: str) -> dict[str, Any]:
    done = _docker("image", "inspect", tag, timeout=60)
    assert done.returncode == 0, done.stderr
    (image,) = json.loads(done.stdout)
    return image  # type: ignore[no-any-return]


def assert_image_is_what_the_template_runs(tag: str) -> None:
    """The built image: its command is the template's, its environment points where the
    bundle is, and its own layers are dependencies, then bundle, then package."""
    image = _inspect(tag)
    FIGURES["image_mb"] = round(image["Size"] / 1e6, 1)
    # no USER: Lambda runs the function as its own user, and `sam local` adds its emulator
    # as the image's user (a non-root one fails there); the tests run it --user 993:990
    assert not image["Config"].get("User"), image["Config"].get("User")
    function = source_template()["Resources"]["SiglipTextFunction"]["Properties"]
    assert image["Config"]["Cmd"] == function["ImageConfig"]["Command"] == [HANDLER]
    env = dict(item.split("=", 1) for item in image["Config"]["Env"])
    assert env["SIGLIP_MODEL_DIR"] == function_environment()["SIGLIP_MODEL_DIR"]
    assert env["ORT_DISABLE_TELEMETRY"] == "1"  # onnxruntime's telemetry writes under $HOME
    history = _docker("history", "--no-trunc", "--format={{.CreatedBy}}", tag).stdout
    steps = [s for s in reversed(history.splitlines()) if "#(nop)" not in s or "COPY" in s]
    own = steps[[i for i, s in enumerate(steps) if "requirements.txt" in s][0] :]
    markers = ["requirements.txt", "pip install", " in /opt/model/", " in /var/task/siglip_text/"]
    found = [next((m for m in reversed(markers) if m in step), step) for step in own]
    assert found == markers, own
    install = own[1]
    for flag in (
        "--require-hashes",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "--target",
    ):
        assert flag in install


def test_a_bundle_readable_only_by_its_owner_still_serves(run_bundle: Any, tmp_path: Path) -> None:
    if not DOCKER:
        pytest.skip("the host fallback runs as this user: file modes need the image")
    # GIVEN a bundle exported under umask 077: files 0600, directory 0700
    private = tmp_path / "private"
    shutil.copytree(DEMO, private, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    for path in private.iterdir():
        path.chmod(0o600)
    private.chmod(0o700)
    # WHEN it is baked into the image and served by Lambda's non-root user THEN it works
    with run_bundle(private) as function:
        (result,) = function.invoke([(event_files()[0]).read_text()])
        status, _, body = _parsed(json.loads(result["response"]))
        assert status == expected_status(event_files()[0].name), body
        # AND nothing the function reads is private to root in the image
        unreadable = _docker(
            "exec", function.id, "find", "/opt/model", "/var/task", "!", "-perm", "-o+r"
        )  # fmt: skip
        assert unreadable.returncode == 0 and unreadable.stdout == "", unreadable.stdout


@pytest.mark.export
def test_an_exported_bundle_serves_every_event(run_bundle: Any, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the export extra makes the bundle")
    from siglip_text.cli import main

    from devkit.tiny_checkpoint import REPOSITORY, REVISION, make_tiny_checkpoint

    # GIVEN a bundle written by `siglip-text export` from a (tiny, random) checkpoint
    checkpoint = make_tiny_checkpoint(tmp_path / "checkpoint")
    bundle = tmp_path / "exported"
    argv = ["export", str(checkpoint), "--out", str(bundle), "--repository", REPOSITORY]
    argv += ["--revision", REVISION, "--threads", "1", "--fidelity-corpus", "16"]
    assert main(argv) == 0
    # WHEN it is baked into the image THEN every event gets the in-process handler's answer
    with run_bundle(bundle) as function:
        serves_every_event(function, bundle, "exported-tiny")


def test_the_real_shaped_int8_bundle_serves_every_event(
    run_bundle: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from devkit.real_bundle import real_bundle

    # GIVEN what `siglip-text export --precision int8` writes for a SigLIP 2 checkpoint (the
    # quantized graph, the 256k Gemma tokenizer, 768 dimensions, another model id)
    bundle = real_bundle(tmp_path_factory).bundle
    # WHEN it is baked into the image THEN every event gets the in-process handler's answer
    with run_bundle(bundle) as function:
        serves_every_event(function, bundle, "real-shaped-int8")


def test_a_corrupted_bundle_fails_init_through_the_runtime_with_its_message(
    run_bundle: Any, tmp_path: Path
) -> None:
    # GIVEN the demo bundle with its graph overwritten, and its manifest recording the new
    # file (a bundle broken at export: the build's sha256 check passes it, init must not)
    broken = tmp_path / "broken"
    shutil.copytree(DEMO, broken, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    graph = broken / "text_model.onnx"
    graph.write_bytes(b"\x00not an onnx graph\x00" * (graph.stat().st_size // 19 + 1))
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["files"]["text_model.onnx"] = {
        "sha256": hashlib.sha256(graph.read_bytes()).hexdigest(),
        "size": graph.stat().st_size,
    }
    (broken / "manifest.json").write_text(json.dumps(manifest))
    # AND the message the in-process init fails with
    with pytest.raises(Exception) as raised:  # noqa: PT011 (whatever init raises)
        _in_process(broken, [])
    where = "/opt/model" if DOCKER else str(broken)  # where the function finds its bundle
    message = str(raised.value).replace(str(broken), where)
    # WHEN the function is invoked
    with run_bundle(broken) as function:
        (result,) = function.invoke([event_files()[0].read_text()])
        logs = function.logs()
    # THEN the runtime reports the init error with that message, and serves nothing
    assert result["status"] >= 500, result
    error = json.loads(result["response"])
    assert "statusCode" not in error, error
    assert message and message in error.get("errorMessage", ""), (message, error)
    assert error.get("errorType") == type(raised.value).__name__, error
    assert "INIT REPORT" in logs and "status: error" in logs, logs[-3000:]
