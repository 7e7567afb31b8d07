"""CloudFormation's template Rules, evaluated for given parameter values as CloudFormation
does before it creates or updates anything: a rule whose RuleCondition holds refuses the
stack when one of its Assertions does not."""

from __future__ import annotations

from typing import Any


def _value(item: Any, params: dict[str, str], list_params: set[str]) -> Any:
    if isinstance(item, dict) and len(item) == 1:
        ((key, arg),) = item.items()
        if key == "Ref":
            value = params[arg]
            if arg in list_params:  # a CommaDelimitedList: its items ("" is one empty item)
                return value.split(",")
            return value
        if key == "Fn::Equals":
            left, right = (_value(v, params, list_params) for v in arg)
            return str(left) == str(right)
        if key == "Fn::Not":
            return not _value(arg[0], params, list_params)
        if key == "Fn::And":
            return all(_value(v, params, list_params) for v in arg)
        if key == "Fn::Or":
            return any(_value(v, params, list_params) for v in arg)
        if key == "Fn::Contains":
            items, wanted = (_value(v, params, list_params) for v in arg)
            return wanted in items
        if key == "Fn::EachMemberIn":
            items, allowed = (_value(v, params, list_params) for v in arg)
            return all(item in allowed for item in items)
        raise ValueError(f"rule function {key} is not supported here")
    return item


def refusals(template: dict[str, Any], params: dict[str, str]) -> dict[str, list[str]]:
    """The rules that refuse these parameter values (every parameter given, as strings),
    each with the descriptions of its failed assertions."""
    list_params = {
        name
        for name, spec in template.get("Parameters", {}).items()
        if spec.get("Type") == "CommaDelimitedList"
    }
    refused: dict[str, list[str]] = {}
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not _value(rule["RuleCondition"], params, list_params):
            continue
        failed = [
            assertion.get("AssertDescription", "")
            for assertion in rule["Assertions"]
            if not _value(assertion["Assert"], params, list_params)
        ]
        if failed:
            refused[name] = failed
    return refused


def constraint_refusals(template: dict[str, Any], params: dict[str, str]) -> dict[str, str]:
    """The parameters whose value CloudFormation refuses before it evaluates any rule: not
    among AllowedValues, not matching AllowedPattern (the whole value), outside MinValue and
    MaxValue, longer than MaxLength. Each with its ConstraintDescription (or the rule hit)."""
    import re

    refused: dict[str, str] = {}
    for name, spec in template.get("Parameters", {}).items():
        if name not in params:
            continue
        value = params[name]
        why = spec.get("ConstraintDescription")
        if "AllowedValues" in spec and value not in {str(v) for v in spec["AllowedValues"]}:
            refused[name] = why or "AllowedValues"
        elif "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
            refused[name] = why or "AllowedPattern"
        elif "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
            refused[name] = why or "MaxLength"
        elif spec.get("Type") == "Number" and (
            ("MinValue" in spec and float(value) < float(spec["MinValue"]))
            or ("MaxValue" in spec and float(value) > float(spec["MaxValue"]))
        ):
            refused[name] = why or "MinValue/MaxValue"
    return refused
