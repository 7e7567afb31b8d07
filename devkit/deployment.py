"""Readers of the deployment files (template.yaml, .dockerignore); handler/Dockerfile itself
is built and run by tests/functional/test_image.py, never interpreted here.

They read just the subset of each format that the project uses and refuse anything else, so
that a new template construct makes the tests fail loudly instead of
being skipped silently.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
DOCKERFILE = ROOT / "handler" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
REQUIREMENTS_IN = ROOT / "layers" / "python" / "requirements.in"
REQUIREMENTS_TXT = ROOT / "layers" / "python" / "requirements.txt"


# --- template.yaml ----------------------------------------------------------------------------


class _CloudFormationLoader(yaml.SafeLoader):  # type: ignore[misc]  # yaml has no stubs here
    """YAML with CloudFormation's short intrinsic tags (!Ref, !Sub, !If, ...) as their long form."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix in ("Ref", "Condition"):  # the two whose long form has no "Fn::"
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    template: dict[str, Any] = yaml.load(path.read_text(), Loader=_CloudFormationLoader)  # noqa: S506
    return template


class Unresolvable(ValueError):
    """Raised when a template value needs something only CloudFormation knows."""


NO_VALUE = object()


def parameter_defaults(template: dict[str, Any], **overrides: str) -> dict[str, str]:
    """Every parameter's value as CloudFormation passes it (a string): default or override."""
    values = {
        name: str(spec["Default"])
        for name, spec in template.get("Parameters", {}).items()
        if "Default" in spec
    }
    unknown = set(overrides) - set(template.get("Parameters", {}))
    if unknown:
        raise KeyError(f"not template parameters: {sorted(unknown)}")
    values.update(overrides)
    return values


def evaluate_conditions(template: dict[str, Any], params: dict[str, str]) -> dict[str, bool]:
    conditions = template.get("Conditions", {})
    done: dict[str, bool] = {}

    def evaluate(value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return params[arg]
            if key == "Condition":
                return condition(arg)
            if key == "Fn::Equals":
                left, right = (evaluate(v) for v in arg)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not evaluate(arg[0])
            if key == "Fn::And":
                return all(evaluate(v) for v in arg)
            if key == "Fn::Or":
                return any(evaluate(v) for v in arg)
            if key == "Fn::Join":  # of a CommaDelimitedList parameter, passed as "a,b"
                items = evaluate(arg[1])
                items = (items.split(",") if items else []) if isinstance(items, str) else items
                return str(arg[0]).join(str(evaluate(v)) for v in items)
            raise Unresolvable(f"condition function {key}")
        return value

    def condition(name: str) -> bool:
        if name not in done:
            done[name] = bool(evaluate(conditions[name]))
        return done[name]

    return {name: condition(name) for name in conditions}


def resolve(
    value: Any,
    params: dict[str, str],
    conditions: dict[str, bool],
    refs: dict[str, str] | None = None,
) -> Any:
    """A template value with parameters, conditions and the given resource refs substituted."""
    refs = refs or {}

    def walk(item: Any) -> Any:
        if isinstance(item, dict) and len(item) == 1:
            ((key, arg),) = item.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return NO_VALUE
                if arg in params:
                    return params[arg]
                if arg in refs:
                    return refs[arg]
                raise Unresolvable(f"Ref {arg}")
            if key == "Fn::If":
                name, then, otherwise = arg
                return walk(then if conditions[name] else otherwise)
            if key == "Fn::Sub" and isinstance(arg, str):
                names = {**params, **refs}

                def substitute(match: re.Match[str]) -> str:
                    if match.group(1) not in names:
                        raise Unresolvable(f"Sub ${{{match.group(1)}}}")
                    return names[match.group(1)]

                return re.sub(r"\$\{([A-Za-z0-9:.]+)\}", substitute, arg)
            if key == "Fn::FindInMap":
                mapping, top, second = (walk(v) for v in arg)
                return load_template()["Mappings"][mapping][top][second]
            if key.startswith("Fn::"):
                raise Unresolvable(key)
        if isinstance(item, dict):
            walked = {k: walk(v) for k, v in item.items()}
            return {k: v for k, v in walked.items() if v is not NO_VALUE}
        if isinstance(item, list):
            return [v for v in (walk(i) for i in item) if v is not NO_VALUE]
        return item

    return walk(value)


#: The function that serves the API (the template's other function is the deploy hook).
SERVED_FUNCTION = "SiglipTextFunction"


def function_resource(template: dict[str, Any]) -> dict[str, Any]:
    """The per-request function (Compute=lambda, the default); Compute=managed-instances
    deploys SiglipTextManagedFunction instead (tests/template/test_template_managed_instances.py),
    and the deploy hook is a third."""
    function: dict[str, Any] = template["Resources"][SERVED_FUNCTION]
    assert function["Type"] == "AWS::Serverless::Function", function["Type"]
    return function


def function_environment(template: dict[str, Any], **overrides: str) -> dict[str, str]:
    """The function's environment as deployed with default parameters (plus overrides)."""
    params = parameter_defaults(template, **overrides)
    conditions = evaluate_conditions(template, params)
    refs = {"ApiKeySecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:key-AbCdEf"}
    variables = function_resource(template)["Properties"]["Environment"]["Variables"]
    return {k: str(v) for k, v in resolve(variables, params, conditions, refs).items()}


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
