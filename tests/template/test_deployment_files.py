"""template.yaml, handler/Dockerfile, .dockerignore and the dependency lock agree with the code.

The deployment files name things the code defines (the handler, SIGLIP_* settings, routes,
the model directory, dependencies); each test reads both sides so that they cannot drift.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import ENV_PREFIX, Settings, load_settings

from devkit.deployment import (
    DOCKERFILE,
    MANAGED_INSTANCES_TEMPLATE,
    REQUIREMENTS_IN,
    REQUIREMENTS_TXT,
    TEMPLATE,
    dockerignore_patterns,
    excluded_from_context,
    function_resource,
    load_template,
)
from devkit.openai_shapes import assert_openai_error
from devkit.paths import ROOT
from devkit.sam import (
    evaluate_conditions,
    function_environment,
    parameter_defaults,
    resolve,
    translate,
)

HANDLER = "siglip_text.lambda_function.handler"
#: Powertools settings the function sets; each is read by Powertools or aws/function.py.
POWERTOOLS_VARIABLES = {
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_LOG_LEVEL",
    "POWERTOOLS_TRACE_DISABLED",
}
#: Never in the function image (export/benchmark/server tools, or the training framework).
NOT_IN_IMAGE = {"torch", "transformers", "onnx", "uvicorn", "optimum", "sentencepiece"}
#: onnxruntime releases before this crash at import on arm64 Lambda (onnxruntime#10038).
ORT_ARM64_FIX = Version("1.26.0")
#: The function that serves (template-managed-instances.yaml's is another stack's).
SERVING_FUNCTION = {"Ref": "SiglipTextFunction"}
#: A topic for the alarms: without one the stack makes none.
TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def function(template: dict[str, Any]) -> dict[str, Any]:
    return function_resource(template)


def lock() -> dict[str, list[tuple[Version, str]]]:
    """requirements.txt: name -> [(pinned version, marker)], with every entry hashed."""
    text = REQUIREMENTS_TXT.read_text()
    entries: dict[str, list[tuple[Version, str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0].rstrip(" \\")
        if not first or first.startswith("#"):
            continue
        requirement = Requirement(first)
        assert "--hash=sha256:" in block, f"{requirement.name} has no hash"
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{requirement.name} is not pinned"
        marker = str(requirement.marker) if requirement.marker else ""
        entries.setdefault(canonicalize_name(requirement.name), []).append(
            (Version(spec.version), marker)
        )
    return entries


# --- the function: command and environment -----------------------------------------------


def test_dockerfile_cmd_and_template_command_are_the_lambda_entry_point(
    function: dict[str, Any],
) -> None:
    # (the image's own CMD is read from the built image: tests/functional/image/test_image.py)
    assert function["Properties"]["ImageConfig"]["Command"] == [HANDLER]
    module, _, attribute = HANDLER.rpartition(".")
    source = ROOT / "handler" / (module.replace(".", "/") + ".py")
    tree = ast.parse(source.read_text())
    top_level = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert attribute in top_level


def test_function_is_an_image_with_architecture_memory_and_admission_from_parameters(
    function: dict[str, Any], template: dict[str, Any]
) -> None:
    props = function["Properties"]
    assert props["PackageType"] == "Image"
    # the architecture is the Build mapping's, which `sam build` reads too (not a parameter)
    assert props["Architectures"] == [{"Fn::FindInMap": ["Build", "Image", "Architecture"]}]
    assert template["Mappings"]["Build"]["Image"]["Architecture"] in {"x86_64", "arm64"}
    assert props["MemorySize"] == {"Ref": "MemorySize"}
    assert "1,769 MB" in template["Parameters"]["MemorySize"]["Description"]
    assert props["ReservedConcurrentExecutions"] == {
        "Fn::If": [
            "HasReservedConcurrency",
            {"Ref": "ReservedConcurrency"},
            {"Ref": "AWS::NoValue"},
        ]
    }
    assert "ProvisionedConcurrencyConfig" not in props
    assert props["AutoPublishAlias"] == "live"
    assert props["Timeout"] == {"Fn::FindInMap": ["Settings", "Function", "Timeout"]}


def test_sam_builds_the_dockerfile_from_the_root_with_arguments_it_declares(
    function: dict[str, Any], template: dict[str, Any]
) -> None:
    metadata = function["Metadata"]
    context = ROOT / metadata["DockerContext"]
    assert context.resolve() == ROOT
    assert (context / metadata["Dockerfile"]).resolve() == DOCKERFILE
    build_args = resolve(template, metadata["DockerBuildArgs"])
    # (that the Dockerfile consumes each of them: the image test builds with them)
    declared = set(re.findall(r"^ARG ([A-Z_]+)=", DOCKERFILE.read_text(), re.MULTILINE))
    assert set(build_args) <= declared
    # the bundle is the Dockerfile's default, layers/model: not a parameter, so that the
    # image `sam build` makes and the one `sam deploy` ships cannot differ
    assert "MODEL_DIR" not in build_args
    assert "ARG MODEL_DIR=layers/model\n" in DOCKERFILE.read_text()
    assert (ROOT / "layers" / "model").is_dir()
    assert not {"ModelDir", "Architecture"} & set(template["Parameters"])


@pytest.mark.parametrize("auth_mode", ["none", "api-key"])
def test_every_siglip_variable_of_the_function_is_a_setting_and_parses(
    template: dict[str, Any], auth_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the environment the function gets with default parameters (the image's ENV, and
    # that the image serves with it, is the image test's)
    env = function_environment(AuthMode=auth_mode)
    names = {k for k in env if k.startswith(ENV_PREFIX)}
    # THEN each SIGLIP_ name is a field of Settings, and every POWERTOOLS_ name a known one
    fields = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    assert names <= fields, names - fields
    assert {k for k in env if not k.startswith(ENV_PREFIX)} <= POWERTOOLS_VARIABLES | {
        "ORT_DISABLE_TELEMETRY"  # onnxruntime's telemetry writes under $HOME and uploads
    }
    # AND the values parse as valid settings
    for key in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.auth_mode == auth_mode
    assert (settings.api_key_secret_arn is not None) == (auth_mode == "api-key")


def test_every_stage_builds_on_the_lambda_python_base_image_the_template_names(
    function: dict[str, Any],
) -> None:
    # (the layers themselves, their order and modes are read from the built image)
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    assert bases and set(bases) == {"${BASE_IMAGE}"}
    # AND the base is pinned by digest, the same in the Dockerfile and the template (which
    # passes it to `sam build`); a build may override it (the stand-in base in tests)
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert re.fullmatch(r"public\.ecr\.aws/lambda/python:3\.1[2-9]@sha256:[0-9a-f]{64}", default)
    template = load_template()
    assert function["Metadata"]["DockerBuildArgs"]["BASE_IMAGE"] == {
        "Fn::FindInMap": ["Build", "Image", "BaseImage"]
    }
    assert template["Mappings"]["Build"]["Image"]["BaseImage"] == default


# --- the API: routes and gateway responses -------------------------------------------------


def test_api_routes_are_exactly_the_apps_routes_each_a_proxy_to_the_live_alias(
    template: dict[str, Any], service: EmbeddingService, settings: Settings
) -> None:
    api = template["Resources"]["SiglipTextApi"]
    assert api["Condition"] == "UseRestApi"
    paths = api["Properties"]["DefinitionBody"]["paths"]
    routed = {(method.upper(), path) for path, item in paths.items() for method in item}
    app = create_app(service, settings)
    served = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    assert routed == served
    assert {("POST", "/v1/embeddings"), ("GET", "/health")} <= routed
    for item in paths.values():
        for operation in item.values():
            integration = operation["x-amazon-apigateway-integration"]
            assert (integration["type"], integration["httpMethod"]) == ("aws_proxy", "POST")
            # the `live` alias by ARN (devkit/stacks.py resolves it)
            uri = integration["uri"]["Fn::Sub"]
            assert uri.endswith(":function:${SiglipTextFunction}:live/invocations")
    # no function Events: SAM would give their invoke permissions no condition
    assert "Events" not in function_resource(template)["Properties"]


def gateway_responses(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]["SiglipTextApi"]["Properties"]["GatewayResponses"]


def test_stage_throttling_is_a_429_and_a_failed_invoke_a_503_that_claims_no_capacity(
    template: dict[str, Any],
) -> None:
    responses = gateway_responses(template)
    # THROTTLED: stage throttling, a 429 with Retry-After
    assert responses["THROTTLED"]["StatusCode"] == "429"
    assert responses["THROTTLED"]["ResponseParameters"]["Headers"]["Retry-After"] == "'1'"
    body = render(responses["THROTTLED"]["ResponseTemplates"]["application/json"])
    assert body["error"]["code"] == "rate_limit_exceeded"
    # INTEGRATION_FAILURE: any failure to invoke (a throttled function, but also one that
    # cannot run): retryable (OpenAI clients retry 5xx), without a claim of capacity
    failure = responses["INTEGRATION_FAILURE"]
    assert failure["StatusCode"] == "503"
    body = render(failure["ResponseTemplates"]["application/json"])
    assert body["error"]["type"] == "server_error"
    assert body["error"]["code"] == "service_unavailable"
    assert "at capacity" not in body["error"]["message"]
    assert responses["INTEGRATION_TIMEOUT"]["StatusCode"] == "504"
    assert responses["REQUEST_TOO_LARGE"]["StatusCode"] == "413"
    assert {"DEFAULT_4XX", "DEFAULT_5XX"} <= set(responses)
    stage = template["Resources"]["SiglipTextApi"]["Properties"]["MethodSettings"][0]
    for index, limit in enumerate(("ThrottlingRateLimit", "ThrottlingBurstLimit")):
        assert resolve(template, stage[limit], {"ApiThrottle": "7/9"}) == "79"[index]


def render(body_template: str) -> dict[str, Any]:
    """A gateway response body as API Gateway fills it: plain $context substitution."""
    used = set(re.findall(r"\$context\.[A-Za-z.]+", body_template))
    # Only variables that cannot break the JSON: messageString is a quoted JSON string.
    assert used <= {"$context.requestId", "$context.error.messageString"}, used
    text = body_template.replace("$context.error.messageString", json.dumps('Gateway "error"'))
    return json.loads(text.replace("$context.requestId", str(uuid.uuid4())))


def test_every_gateway_response_body_is_an_openai_error_with_a_string_code(
    template: dict[str, Any],
) -> None:
    for kind, response in gateway_responses(template).items():
        body = render(response["ResponseTemplates"]["application/json"])
        assert_openai_error(body)
        assert isinstance(body["error"]["code"], str) and body["error"]["code"], kind
        assert body["error"]["type"] in {
            "invalid_request_error",
            "rate_limit_error",
            "server_error",
        }


# --- authentication ------------------------------------------------------------------------


def test_api_key_mode_creates_a_generated_secret_and_lets_only_the_function_read_it(
    template: dict[str, Any], function: dict[str, Any]
) -> None:
    assert set(template["Parameters"]["AuthMode"]["AllowedValues"]) == {"none", "iam", "api-key"}
    secret = template["Resources"]["ApiKeySecret"]
    assert secret["Type"] == "AWS::SecretsManager::Secret"
    assert secret["Condition"] == "UseApiKey"
    assert "SecretString" not in secret["Properties"]  # generated, never in the template
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 32
    # the read; the describe after it: tests/template/test_template_key_secret_access.py
    policy, _ = function["Properties"]["Policies"]
    condition, granted, otherwise = policy["Fn::If"]
    assert condition == "UseApiKey" and otherwise == {"Ref": "AWS::NoValue"}
    assert granted["AWSSecretsManagerGetSecretValuePolicy"]["SecretArn"] == {"Ref": "ApiKeySecret"}
    env = function_environment(AuthMode="api-key")
    assert env["SIGLIP_API_KEY_SECRET_ARN"].startswith("arn:aws:secretsmanager:")
    assert "SIGLIP_API_KEY_SECRET_ARN" not in function_environment(AuthMode="none")


def test_conditions_follow_the_parameters(template: dict[str, Any]) -> None:
    defaults = evaluate_conditions(template, parameter_defaults(template))
    assert defaults["UseApiKey"] is True  # a public URL is protected by default
    assert defaults["HasReservedConcurrency"] is False
    changed = evaluate_conditions(
        template, parameter_defaults(template, AuthMode="none", ReservedConcurrency="2")
    )
    assert changed["UseApiKey"] is False and changed["HasReservedConcurrency"] is True


# --- observability and outputs -------------------------------------------------------------


#: What each frontend's alarms watch beyond Lambda's own metrics: its requests, 5xx count and
#: p99 latency. A function URL has no API Gateway metrics; Lambda publishes Url* metrics.
FRONTEND_METRICS = {
    "rest-api": {
        ("AWS/ApiGateway", "Count"),
        ("AWS/ApiGateway", "5XXError"),
        ("AWS/ApiGateway", "Latency"),
        ("SiglipText", "GatewayInvokeFailures"),  # from the access log (ApiAccessLogs=on)
    },
    "function-url": {
        ("AWS/Lambda", "UrlRequestCount"),
        ("AWS/Lambda", "Url5xxCount"),
        ("AWS/Lambda", "UrlRequestLatency"),
    },
}
#: Lambda's metrics of the function and its own that the alarms watch, whichever the frontend.
FUNCTION_METRICS = {
    ("AWS/Lambda", "Throttles"),
    ("AWS/Lambda", "Errors"),
    ("AWS/Lambda", "Invocations"),
    ("AWS/Lambda", "Duration"),
    ("AWS/Lambda", "ConcurrentExecutions"),
    ("SiglipText", "ApiKeyRefreshFailures"),
}


def alarm_metrics(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics an alarm reads: its own, or each of its metric-math queries'."""
    if "Metrics" not in alarm:
        return [{k: alarm[k] for k in ("Namespace", "MetricName", "Dimensions") if k in alarm}]
    return [query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query]


def metric_name(name: str | dict[str, str]) -> str:
    """A metric's name; one the stack publishes itself is prefixed with the stack's name."""
    return name if isinstance(name, str) else name["Fn::Sub"].removeprefix("${AWS::StackName}-")


@pytest.mark.parametrize("frontend", sorted(FRONTEND_METRICS))
def test_alarms_watch_throttles_errors_5xx_and_p99_latency_of_the_chosen_frontend(
    template: dict[str, Any], frontend: str
) -> None:
    # GIVEN a topic to notify (no alarms without one), the access log, updates at once
    params = {
        "Frontend": frontend,
        "AlarmTopicArn": TOPIC,
        "ApiAccessLogs": "on",
        "ReservedConcurrency": "10",
    }
    conditions = evaluate_conditions(template, parameter_defaults(template, **params))
    alarms = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and conditions.get(r.get("Condition"), True)
    ]
    metrics = [metric for alarm in alarms for metric in alarm_metrics(alarm)]
    watched = {
        (resolve(template, m["Namespace"], params), metric_name(m["MetricName"])) for m in metrics
    }
    assert watched == FUNCTION_METRICS | FRONTEND_METRICS[frontend]
    latency = [a for a in alarms if "latency" in {q["Id"] for q in a.get("Metrics", [])}]
    assert len(latency) == 1
    assert {q["MetricStat"]["Stat"] for q in latency[0]["Metrics"] if "MetricStat" in q} == {
        "p99",
        "SampleCount",
    }
    assert latency[0]["Threshold"] == {"Fn::FindInMap": ["Settings", "Alarms", "LatencyP99Ms"]}
    api_name = template["Resources"]["SiglipTextApi"]["Properties"]["Name"]
    for alarm in alarms:
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopicArn"}]
    for metric in metrics:
        dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
        if metric["Namespace"] == "AWS/ApiGateway":
            assert dimensions["ApiName"] == api_name  # else the alarm watches nothing
        elif metric["MetricName"] == "ApiKeyRefreshFailures":  # the function's EMF metric
            assert set(dimensions) == {"service"}
        elif resolve(template, metric["Namespace"], params) == "SiglipText":  # the access log's
            assert dimensions == {}
        else:
            assert dimensions == {"FunctionName": SERVING_FUNCTION}


@pytest.mark.parametrize(
    ("frontend", "base_url"),
    [
        ("rest-api", "https://abc123.execute-api.us-east-1.amazonaws.com/prod/v1"),
        ("function-url", "https://xyz789.lambda-url.us-east-1.on.aws/v1"),
    ],
)
def test_outputs_give_the_v1_base_url_of_either_frontend_and_the_function_name(
    template: dict[str, Any], frontend: str, base_url: str
) -> None:
    refs = {
        "SiglipTextApi": "abc123",
        "FunctionUrl.FunctionUrl": "https://xyz789.lambda-url.us-east-1.on.aws/",  # as GetAtt
    }
    outputs = {
        name: resolve(template, template["Outputs"][name], {"Frontend": frontend}, refs)
        for name in ("ApiBaseUrl", "HealthUrl", "Frontend")
    }
    assert outputs["ApiBaseUrl"]["Value"] == base_url
    assert outputs["HealthUrl"]["Value"] == base_url.removesuffix("/v1") + "/health"
    assert outputs["Frontend"]["Value"] == frontend
    assert template["Outputs"]["FunctionName"]["Value"] == SERVING_FUNCTION


def test_samconfig_overrides_only_parameters_of_each_environments_template() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert set(config) >= {"default", "prod", "managed-instances"}
    for env, commands in config.items():
        if not isinstance(commands, dict):
            continue
        path = MANAGED_INSTANCES_TEMPLATE if env == "managed-instances" else TEMPLATE
        built = commands.get("build", {}).get("parameters", {}).get("template_file")
        assert built is None or ROOT / built == path, env
        for command in commands.values():
            overrides = command.get("parameters", {}).get("parameter_overrides")
            if overrides:
                pairs = dict(item.split("=", 1) for item in shlex.split(overrides))
                parameter_defaults(load_template(path), **pairs)  # KeyError: not a parameter


# --- the build context and the dependency lock ---------------------------------------------


def test_dockerignore_sends_the_copied_files_and_nothing_else() -> None:
    patterns = dockerignore_patterns()
    for kept in (
        "layers/python/requirements.txt",
        "layers/model/manifest.json",
        "handler/siglip_text/lambda_function.py",
        "handler/siglip_text/demo/tokenizer.json",
    ):
        assert not excluded_from_context(kept, patterns), kept
    for left_out in (
        ".venv/lib/python3.11/site-packages/numpy/__init__.py",
        ".git/HEAD",
        # another bundle: only layers/model goes to the builder (gigabytes each)
        "layers/model-large/text_model.onnx.data",
        ".wheelhouse/numpy.whl",
        "tests/conftest.py",
        "handler/siglip_text/__pycache__/api.cpython-313.pyc",
        "README.md",
        "docs/deploy.md",
    ):
        assert excluded_from_context(left_out, patterns), left_out


def test_build_context_holds_the_runtime_and_no_tool_module() -> None:
    # GIVEN the package as it is in the repository, and .dockerignore
    patterns = dockerignore_patterns()
    package = ROOT / "handler" / "siglip_text"
    sent = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if not excluded_from_context(path.relative_to(ROOT).as_posix(), patterns)
    }
    # THEN no module of siglip_text.tools reaches the builder, and every runtime module does
    assert not {name for name in sent if name.startswith("tools/")}, sorted(sent)
    runtime = {p.name for p in package.glob("*.py")}
    assert runtime and runtime <= sent, sorted(runtime - sent)


#: Dependencies of the package that only siglip_text.tools uses (never in the image).
TOOLS_ONLY = {"tqdm"}


def test_requirements_in_lists_the_project_dependencies_and_boto3() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    wanted -= TOOLS_ONLY
    listed = {
        canonicalize_name(Requirement(line).name)
        for line in REQUIREMENTS_IN.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert listed == wanted | {"boto3"}, "layers/python/requirements.in drifted from pyproject"


def test_lock_pins_and_hashes_every_package_and_satisfies_the_project() -> None:
    pinned = lock()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dependency in project["dependencies"]:
        requirement = Requirement(dependency)
        if canonicalize_name(requirement.name) in TOOLS_ONLY:
            continue
        versions = pinned[canonicalize_name(requirement.name)]
        for version, _ in versions:
            assert requirement.specifier.contains(version, prereleases=True), (dependency, version)
        for extra in requirement.extras:  # aws-lambda-powertools[tracer] -> aws-xray-sdk
            assert extra != "tracer" or "aws-xray-sdk" in pinned
    assert not set(pinned) & NOT_IN_IMAGE
    assert all(version >= ORT_ARM64_FIX for version, _ in pinned["onnxruntime"])


@pytest.mark.slow
def test_template_passes_cfn_lint() -> None:
    api = pytest.importorskip("cfnlint.api", reason="cfn-lint is in the test extra")
    matches = api.lint_file(TEMPLATE)
    assert matches == [], "\n".join(str(m) for m in matches)


# --- patching and the pipeline: .github/ --------------------------------------------------

RENOVATE = ROOT / ".github" / "renovate.json"
DEPLOY_WORKFLOW = ROOT / ".github" / "workflows" / "deploy.yml"
_BASE_PIN = re.compile(r"public\.ecr\.aws/lambda/python:[0-9.]+@sha256:[0-9a-f]{64}")


def _tracked_files_pinning_the_base() -> dict[str, set[str]]:
    """Every file of the repository (but the changelog, which is history) that names the base
    image by digest, with the pins it names."""
    found: dict[str, set[str]] = {}
    for name in _repository_files():
        path = ROOT / name
        if name == "CHANGELOG.md" or not path.is_file():
            continue
        try:
            pins = set(_BASE_PIN.findall(path.read_text()))
        except UnicodeDecodeError:
            continue
        if pins:
            found[name] = pins
    return found


#: Folders of a copy of the repository that are not the repository's (a newcomer's venv).
_NOT_THE_REPOSITORY = {".git", ".venv", "node_modules", "__pycache__"}


def _repository_files() -> list[str]:
    """The repository's files: git's list in a checkout; else (a copy or an archive of the
    repository, as CI's run of the README's block has) every file but a venv's."""
    if (ROOT / ".git").exists():
        return subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    names = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in _NOT_THE_REPOSITORY]
        names += [(Path(folder) / name).relative_to(ROOT).as_posix() for name in files]
    return names


def _js_regex(pattern: str) -> re.Pattern[str]:
    """A Renovate pattern (JavaScript syntax, `/.../` for file patterns) as Python's."""
    body = pattern[1:-1] if pattern.startswith("/") and pattern.endswith("/") else pattern
    return re.compile(body.replace("(?<", "(?P<"))


def test_the_bot_rewrites_every_file_that_pins_the_base_image_so_its_change_is_whole() -> None:
    # GIVEN the patching bot's rule for the base image (docs/deploy-updates.md, "Patching")
    config = json.loads(RENOVATE.read_text())
    (manager,) = [m for m in config["customManagers"] if m.get("datasourceTemplate") == "docker"]
    patterns = [_js_regex(p) for p in manager["managerFilePatterns"]]
    (match,) = [_js_regex(s) for s in manager["matchStrings"]]
    # WHEN every file that names the base image by digest is looked for
    pinned = _tracked_files_pinning_the_base()
    # THEN they all name one digest (the Dockerfile's default is the source) ...
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert {pin for pins in pinned.values() for pin in pins} == {default}
    # ... and the bot rewrites exactly those files, where its pattern finds the pin
    rewritten = {name for name in pinned if any(p.search(name) for p in patterns)}
    assert rewritten == set(pinned), f"not rewritten by the bot: {set(pinned) - rewritten}"
    for name in pinned:
        found = match.search((ROOT / name).read_text())
        assert found is not None and found.group(0) == default, name
        assert found.group("currentDigest") == default.split("@", 1)[1]


def test_the_pipeline_checks_before_it_builds_and_deploys_without_a_prompt() -> None:
    workflow = yaml.safe_load(DEPLOY_WORKFLOW.read_text())
    # only when started by hand: a copy never deploys unconfigured (PyYAML reads `on` as True)
    assert set(workflow[True]) == {"workflow_dispatch"}
    assert workflow["permissions"]["id-token"] == "write"
    (job,) = workflow["jobs"].values()
    steps = [step.get("run", "") + " " + step.get("uses", "") for step in job["steps"]]

    def first(text: str) -> int:
        return next(i for i, step in enumerate(steps) if text in step)

    assert first("check-deploy --config-env prod") < first("configure-aws-credentials")
    assert first("configure-aws-credentials") < first("sam build --config-env prod")
    assert first("sam build --config-env prod") < first("sam deploy --config-env prod")
    credentials = job["steps"][first("configure-aws-credentials")]["with"]
    assert "role-to-assume" in credentials and "aws-access-key-id" not in credentials
    assert "--no-confirm-changeset" in steps[first("sam deploy --config-env prod")]


@pytest.mark.slow  # translates both templates with every production option
def test_the_deploy_docs_name_every_resource_type_stack_tags_cannot_reach() -> None:
    # imported here: cfn-lint's schemas take seconds to import (devkit/sam.py does the same)
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    # GIVEN every resource type the templates translate to, production's options on
    topic = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"
    translated = [
        translate(
            {
                "TrafficShifting": "Canary10Percent5Minutes",
                "AlarmTopicArn": topic,
                "WafRateLimitPerIp": "2000",
                "ApiAccessLogs": "on",
            }
        ),
        translate({"Frontend": "function-url", "ReservedConcurrency": "5"}),
        translate(
            {
                "CapacityProviderSubnetIds": "subnet-0123456789abcdef0",
                "CapacityProviderSecurityGroupIds": "sg-0123456789abcdef0",
                "AlarmTopicArn": topic,
            },
            path=MANAGED_INSTANCES_TEMPLATE,
        ),
    ]
    types = {r["Type"] for cfn in translated for r in cfn["Resources"].values()}

    def taggable(resource_type: str) -> bool:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
        return bool(schema.get("tagging", {}).get("taggable", "Tags" in schema["properties"]))

    # WHEN the registry schemas say which take no tags
    untaggable = {t for t in types if not taggable(t)}
    # THEN docs/deploy.md's Tags table names each of them in its "no" row, and no other
    text = (ROOT / "docs" / "deploy.md").read_text()
    tags = text[text.index("## Tags") :]
    (row,) = [line for line in tags.splitlines() if "| no: not taggable" in line]
    assert set(re.findall(r"`(AWS::[A-Za-z0-9:]+)`", row)) == untaggable
