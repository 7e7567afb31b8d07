"""`siglip-text check-deploy` (tools/deploy_check.py): a samconfig.toml environment checked
against its template's constraints, required values and Rules, offline, before `sam build`.

The repository's own samconfig.toml and templates are checked as shipped; other cases copy
them beside a changed samconfig.toml, so that the template read is the real one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from siglip_text.cli import main
from siglip_text.tools.deploy_check import check_config_env, split_overrides
from siglip_text.tools.exit_status import ToolError

from devkit.paths import ROOT

SAMCONFIG = ROOT / "samconfig.toml"
TOPIC = "arn:aws:sns:us-east-1:123456789012:siglip-text-alarms"


def project_copy(tmp_path: Path, samconfig: str) -> Path:
    """The templates of the repository beside a samconfig.toml of the test's own."""
    for name in ("template.yaml", "template-managed-instances.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    config = tmp_path / "samconfig.toml"
    config.write_text(samconfig)
    return config


def with_prod_line(old: str, new: str) -> str:
    text = SAMCONFIG.read_text()
    section = r"^\[prod\.deploy\.parameters\].*?^parameter_overrides = (.*)$"
    line = re.search(section, text, re.M | re.S)
    assert line is not None
    assert old in line.group(1)
    return text[: line.start(1)] + line.group(1).replace(old, new) + text[line.end(1) :]


def test_the_shipped_prod_line_is_refused_naming_the_empty_alarm_topic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN the repository's samconfig.toml, whose prod line leaves AlarmTopicArn empty
    # WHEN the prod environment is checked, as docs/deploy.md says to before `sam build`
    status = main(["check-deploy", "--config-env", "prod", "--config-file", str(SAMCONFIG)])
    # THEN it fails (exit 1), naming the parameter and the rule that would refuse it
    err = capsys.readouterr().err
    assert status == 1
    assert "AlarmTopicArn" in err
    assert "GradualDeployNeedsAnAlarmTopic" in err
    assert "[prod.deploy.parameters]" in err


def test_the_prod_line_with_a_topic_passes(tmp_path: Path) -> None:
    line = with_prod_line('AlarmTopicArn=\\"\\"', f"AlarmTopicArn={TOPIC}")
    config = project_copy(tmp_path, line)

    report = check_config_env(config, "prod")

    assert report.problems == []
    assert report.values["AlarmTopicArn"] == TOPIC


def test_the_default_environment_passes_and_fits_a_new_accounts_memory() -> None:
    report = check_config_env(SAMCONFIG, "default")

    assert report.problems == []
    # a new account's reduced memory quota is commonly 3,008 MB (docs/deploy.md, pre-flight)
    assert int(report.values["MemorySize"]) <= 3008
    assert report.notes == []


def test_the_managed_instances_line_is_refused_until_its_network_is_named() -> None:
    report = check_config_env(SAMCONFIG, "managed-instances")

    assert report.template.name == "template-managed-instances.yaml"
    assert any("CapacityProviderSubnetIds" in problem for problem in report.problems)
    assert any("CapacityProviderSecurityGroupIds" in problem for problem in report.problems)
    assert int(report.values["CapacityProviderMaxVCpus"]) > 0


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("MemorySize=1769", "MemorySize=64", "MemorySize"),  # below MinValue
        ("Frontend=rest-api", "Frontend=alb", "Frontend"),  # not among AllowedValues
        ("WafRateLimitPerIp=2000", "WafRateLimitPerIp=5", "WafRateLimitPerIp"),  # pattern
        ("ApiAccessLogs=on", "ApiAccessLogs=on NoSuchParameter=1", "NoSuchParameter"),
    ],
)
def test_a_value_cloudformation_refuses_is_named(
    tmp_path: Path, old: str, new: str, named: str
) -> None:
    config = project_copy(tmp_path, with_prod_line(old, new))

    report = check_config_env(config, "prod")

    assert any(problem.startswith(named) for problem in report.problems), report.problems


def test_a_parameter_without_default_or_value_is_required(tmp_path: Path) -> None:
    samconfig = 'version = 0.1\n[default.deploy.parameters]\nstack_name = "x"\n'
    config = project_copy(tmp_path, samconfig)
    template = tmp_path / "template.yaml"
    template.write_text(
        "Parameters:\n  Owner:\n    Type: String\nResources:\n  Topic:\n    Type: AWS::SNS::Topic\n"
    )

    report = check_config_env(config, "default")

    assert report.problems == ["Owner: required (the template gives it no default)"]


def test_an_unknown_environment_is_unusable_input(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["check-deploy", "--config-env", "staging", "--config-file", str(SAMCONFIG)])

    assert status == 2
    assert "[staging]" in capsys.readouterr().err


def test_overrides_split_as_shell_words() -> None:
    assert split_overrides('A=1 B="" C="x y"') == {"A": "1", "B": "", "C": "x y"}
    with pytest.raises(ToolError):
        split_overrides("A=1 loose")
