"""CloudFormation's template Rules and parameter constraints, evaluated for given parameter
values as CloudFormation does before it creates or updates anything: the evaluator of
`siglip-text check-deploy` (siglip_text.tools.deploy_check), the one copy."""

from __future__ import annotations

from siglip_text.tools.deploy_check import constraint_refusals, refusals

__all__ = ["constraint_refusals", "refusals"]
