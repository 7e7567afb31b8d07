"""template.yaml as one deploy creates it, for the template tests: translated by AWS's own SAM
translator (devkit/sam.py), then only the resources whose condition holds for the given
parameters, as CloudFormation would create them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devkit.deployment import load_template
from devkit.sam import evaluate_conditions, parameter_defaults, translate

#: The template's two frontends (its ``Frontend`` parameter).
FRONTENDS = ("rest-api", "function-url")
_NO_VALUE = object()


@dataclass
class Stack:
    """The translated template as one deploy creates it: resources whose condition holds."""

    cfn: dict[str, Any]
    params: dict[str, str]
    conditions: dict[str, bool]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.cfn["Resources"].items()
            if self.conditions.get(resource.get("Condition", ""), True)
        }

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == resource_type}

    def one(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        (item,) = self.of_type(resource_type).items()
        return item

    def value(self, item: Any) -> Any:
        """A property with parameters and conditions applied; resource refs stay as they are."""
        if isinstance(item, dict) and len(item) == 1:
            ((key, arg),) = item.items()
            if key == "Ref" and arg == "AWS::NoValue":
                return _NO_VALUE
            if key == "Ref" and arg in self.params:
                return self.params[arg]
            if key == "Fn::If":
                name, then, otherwise = arg
                return self.value(then if self.conditions[name] else otherwise)
        if isinstance(item, dict):
            values = {k: self.value(v) for k, v in item.items()}
            return {k: v for k, v in values.items() if v is not _NO_VALUE}
        if isinstance(item, list):
            return [v for v in map(self.value, item) if v is not _NO_VALUE]
        return item

    @property
    def alias(self) -> tuple[str, dict[str, Any]]:
        (item,) = [
            (k, r)
            for k, r in self.of_type("AWS::Lambda::Alias").items()
            if r["Properties"]["Name"] == "live"
        ]
        return item


def deploy(**overrides: str) -> Stack:
    cfn = translate(overrides)
    params = parameter_defaults(load_template(), **overrides)
    return Stack(cfn=cfn, params=params, conditions=evaluate_conditions(cfn, params))
