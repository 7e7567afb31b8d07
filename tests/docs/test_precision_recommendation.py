"""One precision recommendation: README, `export --help`, docs/export.md and
docs/performance.md name the same default, and the README's deploy block exports it and
verifies it before `sam build`."""

from __future__ import annotations

import re

from siglip_text.cli import build_parser

from devkit.paths import ROOT

PLACES = ["README.md", "docs/export.md", "docs/performance.md"]


def _export_precision() -> tuple[str, str]:
    parser = build_parser(["export"])
    export = parser._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    [action] = [a for a in export._actions if "--precision" in a.option_strings]
    return action.default, action.help or ""


def test_export_defaults_to_int8_and_its_help_says_so() -> None:
    default, help_text = _export_precision()

    assert default == "int8"
    assert "int8 (default" in help_text and "recommended" in help_text


def test_each_doc_names_int8_as_export_default_and_fp32_never() -> None:
    default, _ = _export_precision()
    for name in PLACES:
        text = " ".join((ROOT / name).read_text().split())
        assert (
            f"{default}, export's default" in text or f"{default} (7-bit), export's default" in text
        ), name
        for other in {"fp32", "int8"} - {default}:
            assert not re.search(rf"{other}[^.]{{0,40}}(export's default|by default)", text), name
            assert f"{other} (the default" not in text and f"{other}, the default" not in text, name


def test_the_readme_deploy_block_exports_the_default_and_verifies_before_sam_build() -> None:
    default, _ = _export_precision()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Deploy to AWS\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]

    export = block.index("siglip-text export ")
    assert (
        f"--precision {default}" in block[export : block.index("\n", block.index("--out", export))]
    )
    verify = block.index("siglip-text verify --model-dir layers/model")
    assert export < verify < block.index("sam build")
