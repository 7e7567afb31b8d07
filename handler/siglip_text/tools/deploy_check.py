"""``siglip-text check-deploy``: a samconfig.toml environment against its template, offline.

CloudFormation refuses a stack whose parameters break a constraint (AllowedValues,
AllowedPattern, MinValue/MaxValue, MaxLength), lack a value with no default, or fail one of
the template's Rules, but `sam deploy` only asks it after `sam build` has built the image and
pushed it to ECR: minutes, Docker and credentials spent before a refusal that the files alone
decide. This command reads what `sam deploy --config-env ENV` reads (the environment's
``parameter_overrides``, its ``template_file``) and evaluates the same checks, with no AWS
call and no Docker: the step before ``sam build`` (docs/deploy.md, "Check before you build").

What it cannot see: the account (quotas, an existing topic, the API Gateway logging role);
docs/deploy.md's pre-flight checks those. It needs PyYAML (the ``deploy`` extra) for the
template's short-form tags; samconfig.toml is read with the standard library.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exit_status import CheckFailed, ToolError

#: The template `sam deploy` uses when the environment names none (SAM CLI's default).
DEFAULT_TEMPLATE = "template.yaml"
#: The reduced memory quota commonly reported for a new account ("New AWS accounts have
#: reduced concurrency and memory quotas", AWS Lambda quotas page): above it, a note.
NEW_ACCOUNT_MEMORY_MB = 3008


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-env",
        default="default",
        help="the samconfig.toml environment `sam deploy --config-env` would use (default: "
        "default)",
    )
    parser.add_argument(
        "--config-file",
        type=Path,
        default=Path("samconfig.toml"),
        help="the SAM CLI configuration file (default: ./samconfig.toml)",
    )
    parser.add_argument(
        "--template",
        type=Path,
        default=None,
        help="the template to check against (default: the environment's template_file, "
        "else template.yaml beside the configuration file)",
    )


def run(args: argparse.Namespace) -> int:
    report = check_config_env(args.config_file, args.config_env, template=args.template)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if report.problems:
        raise CheckFailed(report.failure_message())
    print(report.summary())
    return 0


# --- samconfig.toml, as the SAM CLI reads it ---------------------------------------------


def deploy_options(config: Mapping[str, Any], env: str) -> dict[str, Any]:
    """The options `sam deploy --config-env env` takes from samconfig: the command's section
    over the environment's global one (SAM CLI's configuration precedence)."""
    if env not in config:
        known = ", ".join(sorted(k for k, v in config.items() if isinstance(v, dict)))
        raise ToolError(f"no environment [{env}] in the configuration file (it has: {known})")
    sections = config[env]
    options: dict[str, Any] = {}
    for command in ("global", "deploy"):
        options.update(sections.get(command, {}).get("parameters", {}))
    return options


def split_overrides(value: str | list[str]) -> dict[str, str]:
    """``parameter_overrides`` as the SAM CLI splits it: shell words of ``Key=Value`` (so
    ``Key=""`` is an empty value); a list of such strings is read as their concatenation."""
    text = " ".join(value) if isinstance(value, list) else value
    pairs: dict[str, str] = {}
    for word in shlex.split(text):
        key, sep, item = word.partition("=")
        if not sep or not key:
            raise ToolError(f"parameter_overrides: {word!r} is not Key=Value")
        pairs[key] = item
    return pairs


def template_path(config_file: Path, options: Mapping[str, Any], build: Mapping[str, Any]) -> Path:
    """The template the environment deploys: its deploy (or global) ``template_file``, else
    its build's (`sam deploy` deploys what `sam build` built from it), else template.yaml."""
    name = options.get("template_file") or build.get("template_file") or DEFAULT_TEMPLATE
    return config_file.parent / str(name)


# --- The template, read as CloudFormation reads it ---------------------------------------


def load_template(path: Path) -> dict[str, Any]:
    """A CloudFormation template in YAML, short-form tags (``!Ref``, ``!If``) as their long
    form, as CloudFormation parses it."""
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ToolError(
            "reading the template needs PyYAML: pip install 'siglip-text-lambda[deploy]'"
        ) from exc

    # A loader of its own, so that the tags' constructor is not added to PyYAML's SafeLoader.
    loader_class: Any = type("TemplateLoader", (yaml.SafeLoader,), {})

    def tagged(loader: Any, suffix: str, node: Any) -> dict[str, Any]:
        value: Any
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if suffix == "Ref" or suffix == "Condition":
            return {suffix: value}
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        return {f"Fn::{suffix}": value}

    loader_class.add_multi_constructor("!", tagged)
    if not path.is_file():
        raise ToolError(f"no template {path}")
    parsed = yaml.load(path.read_text(), Loader=loader_class)  # noqa: S506 - a SafeLoader
    if not isinstance(parsed, dict):
        raise ToolError(f"{path} is not a template")
    return parsed


def _rule_value(item: Any, params: Mapping[str, str], list_params: set[str]) -> Any:
    if isinstance(item, dict) and len(item) == 1:
        ((key, arg),) = item.items()
        if key == "Ref":
            value = params[arg]
            if arg in list_params:  # a CommaDelimitedList: its items ("" is one empty item)
                return value.split(",")
            return value
        if key == "Fn::Equals":
            left, right = (_rule_value(v, params, list_params) for v in arg)
            return str(left) == str(right)
        if key == "Fn::Not":
            return not _rule_value(arg[0], params, list_params)
        if key == "Fn::And":
            return all(_rule_value(v, params, list_params) for v in arg)
        if key == "Fn::Or":
            return any(_rule_value(v, params, list_params) for v in arg)
        if key == "Fn::Contains":
            items, wanted = (_rule_value(v, params, list_params) for v in arg)
            return wanted in items
        if key == "Fn::EachMemberIn":
            items, allowed = (_rule_value(v, params, list_params) for v in arg)
            return all(item in allowed for item in items)
        raise ToolError(f"rule function {key} is not supported here")
    return item


def refusals(template: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, list[str]]:
    """The rules that refuse these parameter values (every parameter given, as strings),
    each with the descriptions of its failed assertions: a rule whose RuleCondition holds
    refuses the stack when one of its Assertions does not."""
    list_params = {
        name
        for name, spec in template.get("Parameters", {}).items()
        if spec.get("Type") == "CommaDelimitedList"
    }
    refused: dict[str, list[str]] = {}
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not _rule_value(rule["RuleCondition"], params, list_params):
            continue
        failed = [
            " ".join(str(assertion.get("AssertDescription", "")).split())
            for assertion in rule["Assertions"]
            if not _rule_value(assertion["Assert"], params, list_params)
        ]
        if failed:
            refused[name] = failed
    return refused


def constraint_refusals(template: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, str]:
    """The parameters whose value CloudFormation refuses before it evaluates any rule: not
    among AllowedValues, not matching AllowedPattern (the whole value), outside MinValue and
    MaxValue, longer than MaxLength. Each with its ConstraintDescription (or the rule hit)."""
    refused: dict[str, str] = {}
    for name, spec in template.get("Parameters", {}).items():
        if name not in params:
            continue
        value = params[name]
        why = spec.get("ConstraintDescription")
        if "AllowedValues" in spec and value not in {str(v) for v in spec["AllowedValues"]}:
            allowed = ", ".join(str(v) for v in spec["AllowedValues"])
            refused[name] = why or f"not one of AllowedValues ({allowed})"
        elif "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
            refused[name] = why or f"does not match AllowedPattern {spec['AllowedPattern']}"
        elif "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
            refused[name] = why or f"longer than MaxLength {spec['MaxLength']}"
        elif spec.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                refused[name] = "not a number"
                continue
            if ("MinValue" in spec and number < float(spec["MinValue"])) or (
                "MaxValue" in spec and number > float(spec["MaxValue"])
            ):
                refused[name] = why or f"outside {spec.get('MinValue')} to {spec.get('MaxValue')}"
    return refused


# --- The check ---------------------------------------------------------------------------


@dataclass
class DeployCheck:
    """What ``check-deploy`` found for one environment: `problems` refuse the deploy."""

    config_file: Path
    env: str
    template: Path
    given: dict[str, str]
    values: dict[str, str]
    rules: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def where(self) -> str:
        return f"{self.config_file.name} [{self.env}.deploy.parameters] parameter_overrides"

    def failure_message(self) -> str:
        head = f"{self.env}: CloudFormation would refuse {self.template.name} with {self.where()}:"
        lines = [head]
        lines += [f"  - {problem}" for problem in self.problems]
        lines.append(f"Fill these in {self.where()}, then run this check again.")
        return "\n".join(lines)

    def summary(self) -> str:
        defaults = len(self.values) - len(self.given)
        return (
            f"{self.env}: {len(self.given)} parameters from {self.config_file.name}, "
            f"{defaults} template defaults; {self.template.name}'s constraints and "
            f"{self.rules} rules pass"
        )


def check_config_env(config_file: Path, env: str, *, template: Path | None = None) -> DeployCheck:
    """Check environment `env` of `config_file` against its template, as CloudFormation
    checks the parameters of a create or update."""
    if not config_file.is_file():
        raise ToolError(f"no configuration file {config_file}")
    try:
        config = tomllib.loads(config_file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ToolError(f"{config_file}: {exc}") from exc
    options = deploy_options(config, env)
    build = config[env].get("build", {}).get("parameters", {})
    path = template or template_path(config_file, options, build)
    cfn = load_template(path)
    given = split_overrides(options.get("parameter_overrides", ""))
    declared: dict[str, Any] = cfn.get("Parameters", {})
    report = DeployCheck(
        config_file=config_file,
        env=env,
        template=path,
        given=given,
        values={},
        rules=len(cfn.get("Rules", {})),
    )
    for name in sorted(set(given) - set(declared)):
        report.problems.append(f"{name}: not a parameter of {path.name}")
    values = {name: str(spec["Default"]) for name, spec in declared.items() if "Default" in spec}
    values.update({k: v for k, v in given.items() if k in declared})
    report.values = values
    for name in declared:
        if name not in values:
            report.problems.append(f"{name}: required (the template gives it no default)")
    constraints = constraint_refusals(cfn, values)
    for name, why in constraints.items():
        report.problems.append(f"{name}={values[name]!r}: {why}")
    if report.problems:
        return report  # rules read every parameter: only once each has a valid value
    for rule, descriptions in refusals(cfn, values).items():
        for description in descriptions:
            report.problems.append(f"rule {rule}: {description}")
    memory = values.get("MemorySize")
    on_instances = any(  # Managed Instances' memory is the instances', not this quota
        "CapacityProviderConfig" in (resource.get("Properties") or {})
        for resource in cfn.get("Resources", {}).values()
    )
    if memory and float(memory) > NEW_ACCOUNT_MEMORY_MB and not on_instances:
        report.notes.append(
            f"MemorySize={memory}: a new account's reduced memory quota may refuse it "
            f"(above {NEW_ACCOUNT_MEMORY_MB} MB); docs/deploy.md's pre-flight shows how to "
            "see yours"
        )
    return report
