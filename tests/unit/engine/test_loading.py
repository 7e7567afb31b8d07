"""The init phase (engine/loading.py): one `ServiceInit` holds the service or the error that
stopped it; and the fail-closed matrix: each corrupted artifact stops `load_service`.

One case per corruption, each applied to a fresh copy of the demo bundle, each expected to
raise ModelLoadError with a message naming the cause (and the file, where there is one).
tests/functional/bundle/test_init_fails_closed.py holds the first set (missing files, a branch
name as revision, a dimension that disagrees with the graph, NaN and zero graphs, no
``<pad>``, an unreadable ONNX file, the Lambda and `serve` entry points); this matrix adds
the rest of the list in docs/export.md ("Init fails closed").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from siglip_text.engine.bundle import load_manifest
from siglip_text.engine.errors import ConfigError, ModelLoadError
from siglip_text.engine.loading import ServiceInit
from siglip_text.engine.service import PROBE_TEXT, EmbeddingService
from siglip_text.settings import Settings, load_service, load_settings

from devkit.graphs import save_graph
from devkit.guards import hang_guard

Corruption = Callable[[Path], None]


def manifest(**changes: object) -> Corruption:
    def corrupt(bundle: Path) -> None:
        path = bundle / "manifest.json"
        data = json.loads(path.read_text())
        for key, value in changes.items():
            if value is DELETE:
                del data[key]
            else:
                data[key] = value
        path.write_text(json.dumps(data))

    return corrupt


DELETE = object()


def write(name: str, content: bytes) -> Corruption:
    def corrupt(bundle: Path) -> None:
        (bundle / name).write_bytes(content)

    return corrupt


def truncate(name: str, *, record_size: bool) -> Corruption:
    """Cut a file in half; optionally after recording its whole size in the manifest."""

    def corrupt(bundle: Path) -> None:
        path = bundle / name
        whole = path.read_bytes()
        if record_size:
            manifest(files={name: {"size": len(whole)}})(bundle)
        path.write_bytes(whole[: len(whole) // 2])

    return corrupt


def replace_with(name: str, kind: str) -> Corruption:
    """Put something that is not a readable regular file where an artifact should be."""

    def corrupt(bundle: Path) -> None:
        path = bundle / name
        path.unlink()
        if kind == "directory":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)  # reading it would block forever
        elif kind == "dangling-symlink":
            path.symlink_to(bundle / "nowhere" / name)

    return corrupt


def graph(**options: object) -> Corruption:
    def corrupt(bundle: Path) -> None:
        save_graph(bundle / "text_model.onnx", **options)  # type: ignore[arg-type]

    return corrupt


def edit_graph(change: Callable[[onnx.ModelProto], None], **options: object) -> Corruption:
    """Rebuild a small valid graph, then change it with the onnx API."""

    def corrupt(bundle: Path) -> None:
        path = save_graph(bundle / "text_model.onnx", **options)  # type: ignore[arg-type]
        model = onnx.load(str(path))
        change(model)
        onnx.checker.check_model(model)
        onnx.save(model, str(path))

    return corrupt


def _extra_input(model: onnx.ModelProto) -> None:
    model.graph.input.append(
        helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", 64])
    )


def _float_attention_mask(model: onnx.ModelProto) -> None:
    model.graph.input.append(
        helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", 64])
    )


def _integer_output(model: onnx.ModelProto) -> None:
    (output,) = model.graph.output
    final = next(n for n in model.graph.node if output.name in n.output)
    final.output[0] = "as_float_out"
    model.graph.node.append(
        helper.make_node("Cast", ["as_float_out"], [output.name], to=TensorProto.INT64)
    )
    output.type.tensor_type.elem_type = TensorProto.INT64


def tokenizer(
    *, drop: tuple[str, ...] = (), replace: dict[str, object] | None = None
) -> Corruption:
    """Remove special tokens from tokenizer.json (vocabulary entry renamed), or edit keys."""

    def corrupt(bundle: Path) -> None:
        path = bundle / "tokenizer.json"
        data = json.loads(path.read_text())
        for token in drop:
            data["model"]["vocab"][f"{token}-renamed"] = data["model"]["vocab"].pop(token)
            data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != token]
        if drop:
            data["padding"] = data["post_processor"] = None
        data.update(replace or {})
        path.write_text(json.dumps(data))

    return corrupt


ONNX = r"ONNX model .*text_model\.onnx"
TOKENIZER = r"tokenizer .*tokenizer\.json"
MANIFEST = r"manifest .*manifest\.json"

#: (case, corruption, the message that must name the cause)
MATRIX: list[tuple[str, Corruption, str]] = [
    # the ONNX file
    ("onnx-empty", write("text_model.onnx", b""), f"{ONNX}: file is empty"),
    (
        "onnx-truncated",
        truncate("text_model.onnx", record_size=False),
        f"{ONNX}: ONNX Runtime cannot load it",
    ),
    (
        "onnx-truncated-size-recorded",
        truncate("text_model.onnx", record_size=True),
        rf"{ONNX}: size \d+ bytes differs from the manifest's \d+ \(truncated",
    ),
    (
        "onnx-not-onnx",
        write("text_model.onnx", b"<html>404</html>" * 64),
        f"{ONNX}: ONNX Runtime cannot load it",
    ),
    ("onnx-directory", replace_with("text_model.onnx", "directory"), f"{ONNX}: not a regular"),
    ("onnx-fifo", replace_with("text_model.onnx", "fifo"), f"{ONNX}: not a regular file"),
    (
        "onnx-dangling-symlink",
        replace_with("text_model.onnx", "dangling-symlink"),
        f"{ONNX}: file not found",
    ),
    # the graph's inputs
    (
        "input-ids-int32",
        graph(input_type=TensorProto.INT32),
        "'input_ids' must be int64, graph says tensor\\(int32\\)",
    ),
    (
        "input-ids-float",
        graph(input_type=TensorProto.FLOAT),
        "'input_ids' must be int64, graph says tensor\\(float\\)",
    ),
    ("input-named-ids", graph(input_name="ids"), r"no 'input_ids' input \(inputs: \['ids'\]\)"),
    ("input-unexpected-extra", edit_graph(_extra_input), r"unexpected graph input.*token_type_ids"),
    (
        "attention-mask-float",
        edit_graph(_float_attention_mask),
        "'attention_mask' must be an int32/int64 matrix",
    ),
    ("input-ids-length-32", graph(max_length=32), "takes 32 tokens but the manifest's .* 64"),
    # the graph's output
    ("output-rank-3", graph(output_rank=3), "output 'text_embeds' must be rank 2"),
    (
        "output-dimension-16",
        graph(dimension=16),
        "has dimension 16 but .*embedding_dimension is 32",
    ),
    (
        "output-renamed",
        graph(output_name="pooler_output"),
        r"no output 'text_embeds' \(outputs: \['pooler_output'\]\)",
    ),
    ("output-integer", edit_graph(_integer_output), "output 'text_embeds' is tensor\\(int64\\)"),
    # the probe
    (
        "graph-nan-for-some-ids",
        graph(kind="sqrt-shifted"),
        "inference probe failed: model returned a non-finite value",
    ),
    # the tokenizer
    ("tokenizer-without-eos", tokenizer(drop=("<eos>",)), "<eos> missing from the vocabulary"),
    (
        "tokenizer-without-pad-and-eos",
        tokenizer(drop=("<pad>", "<eos>")),
        "<pad>, <eos> missing from the vocabulary",
    ),
    ("tokenizer-empty", write("tokenizer.json", b""), f"{TOKENIZER}: file is empty"),
    (
        "tokenizer-truncated",
        truncate("tokenizer.json", record_size=False),
        f"{TOKENIZER}: cannot be loaded",
    ),
    (
        "tokenizer-truncated-size-recorded",
        truncate("tokenizer.json", record_size=True),
        f"{TOKENIZER}: size .* \\(truncated",
    ),
    ("tokenizer-not-a-tokenizer", write("tokenizer.json", b'{"vocab": {}}'), "cannot be loaded"),
    (
        "tokenizer-unknown-model",
        tokenizer(replace={"model": {"type": "NoSuchModel"}}),
        f"{TOKENIZER}: cannot be loaded",
    ),
    (
        "tokenizer-directory",
        replace_with("tokenizer.json", "directory"),
        f"{TOKENIZER}: not a regular",
    ),
    # the manifest
    (
        "manifest-not-json",
        write("manifest.json", b"repository: x\n"),
        f"{MANIFEST}: not valid JSON",
    ),
    ("manifest-not-utf8", write("manifest.json", b'{"a": "\xff"}'), f"{MANIFEST}: not valid JSON"),
    ("manifest-a-list", write("manifest.json", b"[]"), f"{MANIFEST}: must be a JSON object"),
    ("manifest-empty", write("manifest.json", b""), f"{MANIFEST}: file is empty"),
    ("manifest-directory", replace_with("manifest.json", "directory"), f"{MANIFEST}: not a"),
    ("revision-v1.0", manifest(revision="v1.0"), "revision: .*commit SHA"),
    ("revision-refs-heads-main", manifest(revision="refs/heads/main"), "revision: .*commit SHA"),
    ("revision-short-sha", manifest(revision="7071af9"), "revision: .*40-character"),
    ("revision-41-hex", manifest(revision="a" * 41), "revision: .*40-character"),
    ("revision-40-non-hex", manifest(revision="g" * 40), "revision: .*hexadecimal"),
    ("revision-integer", manifest(revision=7071), "revision: Input should be a valid string"),
    ("revision-missing", manifest(revision=DELETE), "revision: Field required"),
    ("repository-list", manifest(repository=["a"]), "repository: Input should be a valid string"),
    ("repository-blank", manifest(repository="   "), "repository: .*must not be blank"),
    ("dimension-float", manifest(embedding_dimension=32.0), "embedding_dimension: .*integer"),
    ("dimension-bool", manifest(embedding_dimension=True), "embedding_dimension: .*integer"),
    ("dimension-null", manifest(embedding_dimension=None), "embedding_dimension: .*integer"),
    ("dimension-negative", manifest(embedding_dimension=-32), "embedding_dimension: .*greater"),
    ("dimension-missing", manifest(embedding_dimension=DELETE), "embedding_dimension: Field"),
    ("max-length-string", manifest(text_max_token_length="64"), "text_max_token_length: .*int"),
    ("max-length-1", manifest(text_max_token_length=1), "text_max_token_length: .*greater"),
    ("dimension-16-vs-graph-32", manifest(embedding_dimension=16), "dimension 32 but .* 16"),
    ("max-length-128-vs-graph-64", manifest(text_max_token_length=128), "takes 64 tokens.*128"),
]


def test_matrix_cases_have_distinct_names() -> None:
    names = [name for name, _, _ in MATRIX]
    assert len(names) == len(set(names)) and len(names) >= 40


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [(corrupt, message) for _, corrupt, message in MATRIX],
    ids=[name for name, _, _ in MATRIX],
)
def test_corrupted_bundle_fails_init_naming_the_cause(
    bundle_copy: Path, corrupt: Corruption, message: str
) -> None:
    # GIVEN the demo bundle with one corruption
    corrupt(bundle_copy)
    # WHEN the init phase runs, THEN it stops with a message naming the cause
    with hang_guard(60), pytest.raises(ModelLoadError, match=message):
        load_service(load_settings(model_dir=bundle_copy, ort_intra_op_threads=1))


def test_an_init_holds_its_error_and_raises_it_on_every_call(bundle_copy: Path) -> None:
    # GIVEN a bundle without its tokenizer
    (bundle_copy / "tokenizer.json").unlink()

    # WHEN the init starts: nothing is raised, the error is held
    init = ServiceInit.start(
        load_settings(model_dir=bundle_copy, ort_intra_op_threads=1).init_plan()
    )
    assert isinstance(init.error, ModelLoadError)

    # THEN asking for the service raises it, the same each time
    for _ in range(2):
        with pytest.raises(ModelLoadError, match="tokenizer.json: file not found") as failed:
            init.service()
        assert failed.value is init.error


def test_an_init_that_stopped_before_its_plan_holds_that_error() -> None:
    # GIVEN settings that cannot be read
    try:
        load_settings(ort_intra_op_threads=0)
    except ConfigError as exc:
        init = ServiceInit.failed(exc)

    # THEN the init has no manifest, and its service() raises the settings' error
    assert init.manifest is None
    with pytest.raises(ConfigError, match="SIGLIP_ORT_INTRA_OP_THREADS"):
        init.service()


def test_a_good_init_holds_no_error_and_serves_one_service(settings: Settings) -> None:
    init = ServiceInit.start(settings.init_plan())

    assert init.error is None
    assert init.manifest is not None
    service = init.service()
    assert init.service() is service
    assert set(service.init_timings.as_dict()) >= {"manifest_s", "session_s", "probe_s"}


def test_an_error_after_the_session_starts_is_raised_by_service_only(
    bundle_copy: Path,
) -> None:
    # GIVEN a graph that loads but is not this bundle's (every file is present)
    (bundle_copy / "text_model.onnx").write_bytes(b"not an onnx graph")

    # WHEN started: the files pass their checks, so no error is held yet
    init = ServiceInit.start(
        load_settings(model_dir=bundle_copy, ort_intra_op_threads=1).init_plan()
    )
    assert init.error is None

    # THEN the session's failure is raised by service(), and held from then on
    with pytest.raises(ModelLoadError):
        init.service()
    assert isinstance(init.error, ModelLoadError)


def test_a_manifest_in_memory_builds_the_same_service(
    settings: Settings, service: EmbeddingService
) -> None:
    # GIVEN the demo bundle's manifest read into memory, as export holds the one it writes
    paths = settings.artifact_paths()
    manifest = load_manifest(paths.manifest)

    # WHEN the service is built from it
    built = ServiceInit.start_bundle(manifest, paths, settings.session_config()).service()

    # THEN it computes the vectors the settings' service does
    assert built.embed_texts([PROBE_TEXT]).vectors.tobytes() == (
        service.embed_texts([PROBE_TEXT]).vectors.tobytes()
    )
