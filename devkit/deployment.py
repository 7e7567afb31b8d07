"""Readers of the deployment files (template.yaml, .dockerignore); handler/Dockerfile itself
is built and run by tests/functional/image/test_image.py, never interpreted here. What
CloudFormation makes of a template (conditions, intrinsic functions) is devkit/sam.py's one
resolver, on the template AWS's SAM translator makes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from siglip_text.tools import deploy_check

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
MANAGED_INSTANCES_TEMPLATE = ROOT / "template-managed-instances.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
DOCKERFILE = ROOT / "handler" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
REQUIREMENTS_IN = ROOT / "layers" / "python" / "requirements.in"
REQUIREMENTS_TXT = ROOT / "layers" / "python" / "requirements.txt"


# --- template.yaml ----------------------------------------------------------------------------


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """A template with CloudFormation's short intrinsic tags (!Ref, !Sub, !If, ...) as their
    long form: `siglip-text check-deploy`'s reader, the one copy."""
    return deploy_check.load_template(path)


#: The function that serves the API (the template's other function is the deploy hook).
SERVED_FUNCTION = "SiglipTextFunction"


def function_resource(template: dict[str, Any]) -> dict[str, Any]:
    """The function that serves (template-managed-instances.yaml has its own; the deploy hook
    is a zip function beside it)."""
    function: dict[str, Any] = template["Resources"][SERVED_FUNCTION]
    assert function["Type"] == "AWS::Serverless::Function", function["Type"]
    return function


# --- samconfig.toml ---------------------------------------------------------------------------


def samconfig_parameters(env: str = "default", command: str = "deploy") -> dict[str, str]:
    """The parameters `sam <command> --config-env <env>` passes: its section's one
    `parameter_overrides` line (the SAM CLI splits it as a shell does)."""
    config = tomllib.loads(SAMCONFIG.read_text())
    line = config[env].get(command, {}).get("parameters", {}).get("parameter_overrides", "")
    return deploy_check.split_overrides(line)


# --- .dockerignore ----------------------------------------------------------------------------


def dockerignore_patterns(path: Path = DOCKERIGNORE) -> list[str]:
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip("/")
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def excluded_from_context(relative: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path (or one of its parents) decides."""
    parts = relative.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern[1:] if negate else pattern)
        if any(regex.fullmatch(candidate) for candidate in candidates):
            excluded = not negate
    return excluded
