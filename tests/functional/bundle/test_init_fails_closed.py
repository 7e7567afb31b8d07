"""Every broken artifact stops the init phase with a message naming its cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from siglip_text.engine.errors import ModelLoadError
from siglip_text.settings import load_service, load_settings

from devkit.graphs import save_graph


def load(bundle: Path) -> None:
    load_service(load_settings(model_dir=bundle, ort_intra_op_threads=1))


def edit_manifest(bundle: Path, **changes: object) -> None:
    path = bundle / "manifest.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_intact_bundle_loads(bundle_copy: Path) -> None:
    load(bundle_copy)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"revision": "main"}, "revision: .*40-character hexadecimal commit SHA"),
        ({"repository": ""}, "repository: "),
        ({"embedding_dimension": "32"}, "embedding_dimension: "),
        ({"text_max_token_length": 0}, "text_max_token_length: "),
    ],
)
def test_bad_manifest_field_fails_init(bundle_copy: Path, changes: dict, message: str) -> None:
    edit_manifest(bundle_copy, **changes)
    with pytest.raises(ModelLoadError, match=message):
        load(bundle_copy)


def test_dimension_that_disagrees_with_the_graph_fails_init(bundle_copy: Path) -> None:
    edit_manifest(bundle_copy, embedding_dimension=768)
    with pytest.raises(
        ModelLoadError, match="dimension 32 but the manifest's embedding_dimension is 768"
    ):
        load(bundle_copy)


def test_token_length_that_disagrees_with_the_graph_fails_init(bundle_copy: Path) -> None:
    edit_manifest(bundle_copy, text_max_token_length=32)
    with pytest.raises(ModelLoadError, match="takes 64 tokens.*32"):
        load(bundle_copy)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("manifest.json", "manifest"),
        ("text_model.onnx", "ONNX model"),
        ("tokenizer.json", "tokenizer"),
    ],
)
def test_missing_artifact_fails_init_naming_it(bundle_copy: Path, name: str, what: str) -> None:
    (bundle_copy / name).unlink()
    with pytest.raises(ModelLoadError, match=f"{what} .*{name}: file not found"):
        load(bundle_copy)


def test_graph_without_input_ids_fails_init(bundle_copy: Path) -> None:
    save_graph(bundle_copy / "text_model.onnx", input_name="ids")
    with pytest.raises(ModelLoadError, match="no 'input_ids' input"):
        load(bundle_copy)


def test_graph_with_wrong_output_dimension_fails_init(bundle_copy: Path) -> None:
    save_graph(bundle_copy / "text_model.onnx", dimension=8)
    with pytest.raises(ModelLoadError, match="has dimension 8"):
        load(bundle_copy)


@pytest.mark.parametrize(("kind", "message"), [("nan", "non-finite"), ("zero", "zero vector")])
def test_graph_emitting_nan_or_zeros_fails_the_probe(
    bundle_copy: Path, kind: str, message: str
) -> None:
    save_graph(bundle_copy / "text_model.onnx", kind=kind)
    with pytest.raises(ModelLoadError, match=f"inference probe failed: .*{message}"):
        load(bundle_copy)


def test_tokenizer_without_pad_fails_init(bundle_copy: Path) -> None:
    path = bundle_copy / "tokenizer.json"
    data = json.loads(path.read_text())
    data["model"]["vocab"]["<blank>"] = data["model"]["vocab"].pop("<pad>")
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<pad>"]
    data["padding"] = None
    path.write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match="<pad> missing"):
        load(bundle_copy)


def test_tokenizer_larger_than_the_graph_vocabulary_fails_the_probe(bundle_copy: Path) -> None:
    path = bundle_copy / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab = data["model"]["vocab"]
    for extra in range(50):
        vocab[f"zzextra{extra}"] = len(vocab)
    path.write_text(json.dumps(data))
    size = len(vocab)
    with pytest.raises(
        ModelLoadError,
        match=rf"inference probe failed: the graph cannot embed token id {size - 1}, the last of "
        rf"the tokenizer's {size} entries: its token embedding table is smaller",
    ):
        load(bundle_copy)


def test_unreadable_onnx_file_fails_init(bundle_copy: Path) -> None:
    if os.geteuid() == 0:
        # root reads anything; a directory in the file's place is unreadable as a file
        (bundle_copy / "text_model.onnx").unlink()
        (bundle_copy / "text_model.onnx").mkdir()
        pattern = "not a regular file"
    else:
        (bundle_copy / "text_model.onnx").chmod(0)
        pattern = "not readable"
    with pytest.raises(ModelLoadError, match=pattern):
        load(bundle_copy)


def run_python(code: str, env_changes: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGLIP_")}
    env.update(env_changes)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_lambda_init_phase_fails_closed_on_a_bad_bundle(bundle_copy: Path) -> None:
    edit_manifest(bundle_copy, revision="main")
    result = run_python(
        "import siglip_text.lambda_function",
        {
            "SIGLIP_MODEL_DIR": str(bundle_copy),
            "SIGLIP_AUTH_MODE": "none",
            "POWERTOOLS_TRACE_DISABLED": "true",
        },
    )
    assert result.returncode != 0
    assert "ModelLoadError" in result.stderr and "revision" in result.stderr


@pytest.mark.slow
def test_lambda_init_phase_fails_closed_without_configuration() -> None:
    result = run_python("import siglip_text.lambda_function", {"POWERTOOLS_TRACE_DISABLED": "true"})
    assert result.returncode != 0
    # the auth-mode rule is checked first, before any file is read
    assert "SIGLIP_AUTH_MODE is not set" in result.stderr
    result = run_python(
        "import siglip_text.lambda_function",
        {"POWERTOOLS_TRACE_DISABLED": "true", "SIGLIP_AUTH_MODE": "none"},
    )
    assert result.returncode != 0
    assert "SIGLIP_MODEL_MANIFEST_PATH is not set" in result.stderr


@pytest.mark.slow
def test_serve_exits_non_zero_on_a_bad_bundle(bundle_copy: Path) -> None:
    (bundle_copy / "tokenizer.json").unlink()
    result = run_python(
        "import sys; from siglip_text.cli import main; "
        f"sys.exit(main(['serve', '--model-dir', {str(bundle_copy)!r}, '--port', '1']))",
        {},
    )
    assert result.returncode == 1
    assert "cannot start" in result.stderr and "tokenizer.json: file not found" in result.stderr


def observed_init(model_dir: Path, at_start: str, report: str) -> dict:
    """Import the Lambda entry point in a fresh process. When the session starts building
    (`loading.start_session`), the expression ``at_start`` is appended to ``seen``;
    afterwards the dict expression ``report`` is printed (``entry`` is the module, None if
    the init failed) and returned, parsed."""
    code = (
        "import gc, json, sys\n"
        "import siglip_text.engine.loading as loading\n"
        "start = loading.start_session\n"
        "seen = []\n"
        "def observed(*args, **kwargs):\n"
        f"    seen.append({at_start})\n"
        "    return start(*args, **kwargs)\n"
        "loading.start_session = observed\n"
        "try:\n"
        "    import siglip_text.lambda_function as entry\n"
        "except Exception:\n"
        "    entry = None\n"
        f"print(json.dumps({report}))\n"
    )
    result = run_python(
        code,
        {
            "SIGLIP_MODEL_DIR": str(model_dir),
            "SIGLIP_AUTH_MODE": "none",
            "POWERTOOLS_TRACE_DISABLED": "true",
        },
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_lambda_init_starts_the_session_before_it_imports_the_web_stack(demo_dir: Path) -> None:
    # ONNX Runtime builds the session without the GIL, so it overlaps with importing FastAPI,
    # Mangum and Powertools only if it starts first (`assembly.assemble_lambda`).
    report = observed_init(
        demo_dir,
        "[m for m in ('fastapi', 'mangum', 'aws_lambda_powertools', 'starlette')"
        " if m in sys.modules]",
        "{'imported_first': [m for found in seen for m in found],"
        " 'timings': entry.parts.service.init_timings.as_dict()}",
    )
    assert report["imported_first"] == []
    assert set(report["timings"]) >= {"tokenizer_s", "session_s", "session_wait_s", "probe_s"}


@pytest.mark.slow
@pytest.mark.parametrize("intact", [True, False], ids=["intact", "bad-bundle"])
def test_lambda_init_pauses_the_collector_and_resumes_it_either_way(
    bundle_copy: Path, intact: bool
) -> None:
    # The cyclic collector is paused for the init (`lambda_function`'s first statement) and
    # resumes when it ends: with the init's objects frozen after a good one, plainly after a
    # failed one (a test process that imports the entry point goes on collecting).
    if not intact:
        (bundle_copy / "text_model.onnx").write_bytes(b"not an onnx graph")
    report = observed_init(
        bundle_copy,
        "not gc.isenabled()",
        "{'paused': seen, 'failed': entry is None, 'enabled': gc.isenabled(),"
        " 'frozen': gc.get_freeze_count()}",
    )
    assert report["failed"] is not intact
    assert report["paused"] == [True]
    assert report["enabled"] is True
    assert (report["frozen"] > 10_000) if intact else (report["frozen"] == 0)
