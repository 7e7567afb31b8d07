"""`sam deploy --guided`, driven at a pseudo-terminal up to its first call to AWS.

No credentials and no network: the SAM CLI asks its questions, saves the answers, then stops
where it would look for its S3 bucket ("Unable to locate credentials"). A stranger's first
`sam deploy --guided` asks exactly these: one question per template parameter (guided shows
no parameter's description) and SAM's own eight.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devkit.deployment import load_template
from devkit.guided import drive_guided
from devkit.paths import ROOT
from devkit.sam_build import project_copy, sam_executable

pytestmark = [pytest.mark.slow, pytest.mark.sam_cli]  # the SAM CLI in a process of its own

#: SAM's own questions: stack name, region, confirm changes, IAM role creation, disable
#: rollback, save the answers, the file, the environment.
SAM_QUESTIONS = 8
#: What a stranger answers: AWS's region (the rest: Enter, the defaults offered).
ANSWERS = {"AWS Region": "us-east-1"}


@pytest.fixture(scope="module")
def sam() -> str:
    found = sam_executable()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no SAM CLI: .ci/run installs it in .sam-cli/")
        pytest.skip("no SAM CLI (python3 -m venv .sam-cli && .sam-cli/bin/pip install aws-sam-cli)")
    return found


def test_guided_asks_one_question_per_parameter_and_sams_own_eight(
    sam: str, tmp_path: Path
) -> None:
    project = project_copy(ROOT / "handler" / "siglip_text" / "demo", tmp_path)
    run = drive_guided(sam, project, ANSWERS)
    # THEN it got to its first call to AWS, having asked every question
    assert "Unable to locate credentials" in run.transcript, run.transcript[-2000:]
    parameters = load_template()["Parameters"]
    asked = [q for q in run.questions if q.startswith("Parameter ")]
    assert [q.split()[1] for q in asked] == list(parameters)
    assert len(run.questions) == len(parameters) + SAM_QUESTIONS <= 22, run.questions
    # AND it offered the template's defaults, the small deploy
    assert "Parameter WafRateLimitPerIp [0]:" in asked
    assert "Parameter TrafficShifting [None]:" in asked
    print(f"\n[test_guided_deploy] sam deploy --guided asks {len(run.questions)} questions")
