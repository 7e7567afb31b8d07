"""`siglip-text export`, `reference` and `verify` on a real (tiny, random) SiglipModel.

The checkpoint is made here from a config and written with save_pretrained, like a Hub
download; it is exported once per module for fp32 and int8, and every check runs ONNX
Runtime on the exported graphs and PyTorch on the checkpoint: nothing is mocked.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from siglip_text.cli import main
from siglip_text.engine.bundle import sha256_file
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings
from siglip_text.tools.export.checkpoint import (
    SourceSpec,
    load_checkpoint,
    pooled_vectors,
)
from siglip_text.tools.files import write_jsonl
from siglip_text.tools.reference import make_reference

from devkit.references import pipeline_reference
from devkit.tiny_checkpoint import (
    REPOSITORY,
    REVISION,
    make_tiny_checkpoint,
)
from devkit.tiny_checkpoint import export_tiny as _export

pytestmark = [pytest.mark.export, pytest.mark.slow]

TEXTS = [
    "a photo of a cat",
    "A Photo Of A CAT",
    "this is a photo of a dog.",
    "Two DOGS playing in the Snow",
    "Café Crème BRÛLÉE",
    "",
    "一只猫的照片",
    "a red block and a robot arm on the kitchen table " * 8,
    "ΟΔΟΣ at night",
    "The Robot Arm",
]


def _service(bundle: Path) -> EmbeddingService:
    return load_service(
        load_settings(
            model_dir=bundle,
            model_manifest_path=bundle / "manifest.json",
            onnx_model_path=bundle / "text_model.onnx",
            tokenizer_path=bundle / "tokenizer.json",
            ort_intra_op_threads=1,
        )
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint"))


@pytest.fixture(scope="module")
def loaded(checkpoint: Path) -> Any:
    return load_checkpoint(SourceSpec(str(checkpoint), "local", REVISION))


@pytest.fixture(scope="module")
def fp32_bundle(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fp32") / "bundle"
    assert _export(checkpoint, out) == 0
    return out


@pytest.fixture(scope="module")
def int8_bundle(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("int8") / "bundle"
    assert _export(checkpoint, out, "--precision", "int8") == 0
    return out


@pytest.fixture(scope="module")
def fp32_service(fp32_bundle: Path) -> EmbeddingService:
    return _service(fp32_bundle)


@pytest.fixture(scope="module")
def good_reference(loaded: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reference") / "good.jsonl"
    write_jsonl(path, make_reference(loaded.tower, loaded.tokenizer, TEXTS, lowercase="unicode"))
    return path


def _verify(bundle: Path, reference: Path, *extra: str) -> int:
    return main(
        [
            "verify",
            "--model-dir",
            str(bundle),
            "--reference",
            str(reference),
            "--threads",
            "1",
            "--quiet",
            *extra,
        ]
    )


# -- export -----------------------------------------------------------------------------


def test_fp32_export_writes_contract_fields_provenance_and_file_hashes(fp32_bundle: Path) -> None:
    manifest = json.loads((fp32_bundle / "manifest.json").read_text())

    # the weights sit beside the graph, in the one .data file ONNX Runtime memory-maps
    assert sorted(p.name for p in fp32_bundle.iterdir()) == [
        "manifest.json",
        "text_model.onnx",
        "text_model.onnx.data",
        "tokenizer.json",
    ]
    assert manifest["graph_optimization"] == "extended"
    assert manifest["repository"] == REPOSITORY
    assert manifest["revision"] == REVISION
    assert manifest["embedding_dimension"] == 32
    assert manifest["text_max_token_length"] == 64
    assert manifest["precision"] == "fp32"
    assert manifest["lowercase"] == "unicode"
    assert manifest["opset"] == 17
    assert manifest["source_kind"] == "local"
    assert manifest["architecture"] == "SiglipModel"
    assert {"transformers", "torch", "onnx", "onnxruntime", "tokenizers"} <= set(
        manifest["libraries"]
    )
    assert manifest["logit_scale"] == pytest.approx(math.log(10.0))
    assert manifest["logit_bias"] == pytest.approx(-10.0)
    assert set(manifest["files"]) == {"text_model.onnx", "text_model.onnx.data", "tokenizer.json"}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(fp32_bundle / name)
        assert entry["size"] == (fp32_bundle / name).stat().st_size
    assert manifest["export_check"]["tokenizer_mismatches"] == 0
    assert manifest["export_check"]["vs_pytorch"]["cosine_min"] >= 0.99999


def test_fp32_bundle_matches_pytorch_above_cosine_0_99999(
    fp32_service: EmbeddingService, loaded: Any
) -> None:
    # GIVEN the served path (tokenizer.json + ONNX) and the PyTorch tower fed the same ids
    ids = fp32_service.tokenizer.encode_texts(TEXTS).ids
    ours = fp32_service.embed_texts(TEXTS).vectors.astype(np.float64)
    theirs = pooled_vectors(loaded.tower, ids.tolist()).astype(np.float64)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)

    # THEN every text agrees to five nines
    assert np.einsum("ij,ij->i", ours, theirs).min() >= 0.99999


def test_exported_tokenizer_lowercases_as_python_and_keeps_the_contract(
    fp32_service: EmbeddingService, loaded: Any
) -> None:
    from siglip_text.tools.export.checkpoint import contract_token_ids

    ours = fp32_service.tokenizer.encode_texts(TEXTS).ids.tolist()
    assert ours == contract_token_ids(loaded.tokenizer, TEXTS, lowercase="unicode", max_length=64)
    assert ours[0][ours[0].index(1) + 1 :] == [0] * (63 - ours[0].index(1))


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_serve_loads_the_exported_bundle_and_answers_openai_requests(
    precision: str, fp32_bundle: Path, int8_bundle: Path
) -> None:
    bundle = fp32_bundle if precision == "fp32" else int8_bundle
    settings = load_settings(model_dir=bundle, ort_intra_op_threads=1)

    with TestClient(create_app(load_service(settings), settings)) as client:
        response = client.post(
            "/v1/embeddings", json={"model": REPOSITORY, "input": ["a photo of a cat"]}
        )

    assert response.status_code == 200, response.text
    vector = np.asarray(response.json()["data"][0]["embedding"])
    assert vector.shape == (32,)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_int8_export_quantizes_the_matmuls_and_the_token_table(
    int8_bundle: Path, fp32_bundle: Path
) -> None:
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(int8_bundle / "text_model.onnx")).graph
    ops = [node.op_type for node in graph.node]
    tables = {
        init.name: numpy_helper.to_array(init) for init in graph.initializer if len(init.dims) == 2
    }
    vocab = json.loads((int8_bundle / "manifest.json").read_text())["quantization"][
        "token_embedding"
    ]["shape"][0]

    # 2 layers x (q, k, v, out, fc1, fc2) projections run in int8: the first layer's q, k, v
    # in one QAttention (the fused attention, quantized), the rest as integer matmuls (fused
    # by the offline optimization into ONNX Runtime's int8 kernels); no float MatMul is left
    # with a weight matrix
    integer = ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
    assert ops.count("QAttention") == 1
    assert sum(ops.count(op) for op in integer) + 3 * ops.count("QAttention") >= 12
    float_weights = [
        node.name
        for node in graph.node
        if node.op_type in ("MatMul", "FusedMatMul") and node.input[1] in tables
    ]
    assert float_weights == []
    token_tables = [a for a in tables.values() if a.shape[0] == vocab]
    assert [a.dtype for a in token_tables] == [np.int8]

    def weights(bundle: Path) -> int:
        return sum(p.stat().st_size for p in bundle.glob("text_model.onnx*"))

    assert weights(int8_bundle) < 0.7 * weights(fp32_bundle)


def test_int8_manifest_records_fidelity_against_fp32(int8_bundle: Path) -> None:
    manifest = json.loads((int8_bundle / "manifest.json").read_text())

    assert manifest["precision"] == "int8"
    fidelity = manifest["fidelity"]
    assert fidelity["cosine"]["cosine_min"] >= 0.99
    assert 0.0 <= fidelity["top10_overlap"]["min"] <= fidelity["top10_overlap"]["mean"] <= 1.0
    assert fidelity["top10_overlap"]["k"] == 10
    assert fidelity["fp32_vs_pytorch"]["cosine_min"] >= 0.99999
    assert manifest["files"]["text_model.onnx"]["size"] == (
        (int8_bundle / "text_model.onnx").stat().st_size
    )


def test_int8_vectors_stay_close_to_fp32(int8_bundle: Path, fp32_service: EmbeddingService) -> None:
    int8 = _service(int8_bundle)

    cosine = np.einsum(
        "ij,ij->i", int8.embed_texts(TEXTS).vectors, fp32_service.embed_texts(TEXTS).vectors
    )

    assert cosine.min() >= 0.99


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--revision", REVISION], "--repository"),
        (["--repository", REPOSITORY], "--revision"),
        (["--repository", REPOSITORY, "--revision", "main"], "full 40-character commit SHA"),
        (["--repository", REPOSITORY, "--revision", "0123456"], "full 40-character commit SHA"),
    ],
)
def test_export_of_a_local_directory_fails_closed_without_repository_and_sha(
    checkpoint: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    out = tmp_path / "bundle"

    status = main(["export", str(checkpoint), "--out", str(out), *flags])

    assert status == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_export_of_a_hub_id_requires_a_full_commit_sha_before_any_download(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["export", "google/siglip2-base-patch16-224", "--out", str(tmp_path / "b")])

    assert status == 2
    assert "--revision with the full commit SHA" in capsys.readouterr().err


def test_export_refuses_a_non_empty_output_directory(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")

    assert _export(checkpoint, tmp_path) == 2
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_fusible_tower_computes_transformers_pooled_output(loaded: Any) -> None:
    import torch
    from siglip_text.tools.export.fusible import fusible_tower

    # GIVEN random ids (pads, EOS and content anywhere), WHEN both forwards run
    ids = torch.randint(0, loaded.tower.config.vocab_size, (5, 64), generator=torch.manual_seed(3))
    with torch.inference_mode():
        expected = loaded.tower(input_ids=ids).pooler_output
        ours = fusible_tower(loaded.tower)(ids)

    # THEN the rewritten tower (last layer at the pooled position only) is the same function
    assert torch.allclose(ours, expected, atol=1e-5, rtol=1e-5)


def test_fp32_export_fuses_attention_and_gelu_and_records_it(
    fp32_bundle: Path,
) -> None:
    import onnx

    ops = [n.op_type for n in onnx.load(str(fp32_bundle / "text_model.onnx")).graph.node]
    graph = json.loads((fp32_bundle / "manifest.json").read_text())["graph"]

    # 2 layers: the first as one fused Attention; the last computes one query (unfused)
    assert ops.count("Attention") == 1 and ops.count("Softmax") == 1
    assert ops.count("FastGelu") == 2
    # SkipLayerNormalization is left unfused on purpose (slower on the CPU kernels)
    assert ops.count("LayerNormalization") == 5 and "SkipLayerNormalization" not in ops
    assert graph["forward"] == "fusible" and graph["last_layer"] == "pooled position only"
    assert graph["fused_operators"]["Attention"] == 1


def test_plain_graph_export_keeps_transformers_forward(checkpoint: Path, tmp_path: Path) -> None:
    import onnx

    assert _export(checkpoint, tmp_path / "plain", "--plain-graph") == 0

    ops = [n.op_type for n in onnx.load(str(tmp_path / "plain" / "text_model.onnx")).graph.node]
    manifest = json.loads((tmp_path / "plain" / "manifest.json").read_text())
    assert "Attention" not in ops and ops.count("Softmax") == 2
    assert manifest["graph"] == {
        "forward": "transformers",
        "last_layer": "all positions",
        "fused_operators": {},
    }


def test_export_check_catches_a_last_layer_that_pools_the_wrong_position(
    checkpoint: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from siglip_text.tools.export import fusible

    # GIVEN a pooled-position rewrite that computes the first position, not the last
    monkeypatch.setattr(fusible, "POOLED_POSITION", 0)

    # WHEN exported, THEN the check against PyTorch fails it: no manifest, not servable
    assert _export(checkpoint, tmp_path / "wrong") == 1
    assert "ONNX graph vs PyTorch: lowest cosine" in capsys.readouterr().err
    assert not (tmp_path / "wrong" / "manifest.json").exists()


def test_export_below_the_cosine_threshold_fails_and_writes_no_manifest(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bundle"

    status = _export(checkpoint, out, "--min-cosine", "1.5")

    assert status == 1
    err = capsys.readouterr().err
    assert "ONNX graph vs PyTorch: lowest cosine" in err and "cannot be served" in err
    assert not (out / "manifest.json").exists()
    assert sorted(p.name for p in out.iterdir()) == [
        "text_model.onnx",
        "text_model.onnx.data",
        "tokenizer.json",
    ]


def test_export_of_a_checkpoint_tokenizer_that_adds_bos_succeeds_and_says_so(
    checkpoint: Path,
    tmp_path: Path,
    fp32_bundle: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    from tokenizers import Tokenizer, processors

    # GIVEN a checkpoint whose own tokenizer adds <bos>, unlike the contract
    source = tmp_path / "bos-checkpoint"
    shutil.copytree(checkpoint, source)
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 2), ("<eos>", 1)]
    )
    tokenizer.save(str(source / "tokenizer.json"))

    # WHEN it is exported
    status = _export(source, tmp_path / "bundle")

    # THEN the bundle follows the contract (the ids of the consistent checkpoint's bundle),
    # and the summary and the manifest say what transformers' own call of it does
    out = capsys.readouterr().out
    assert status == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    loaded = manifest["checkpoint_tokenizer"]
    assert "with a leading <bos>" in loaded["note"]
    assert loaded["transformers"] in loaded["note"]
    assert "adds <bos>" in loaded["post_processing"]
    assert f"NOTE: {loaded['note']}" in out
    ids = _service(tmp_path / "bundle").tokenizer.encode_texts(TEXTS).ids
    assert ids.tolist() == _service(fp32_bundle).tokenizer.encode_texts(TEXTS).ids.tolist()


def test_export_of_a_consistent_checkpoint_records_no_note(fp32_bundle: Path) -> None:
    loaded = json.loads((fp32_bundle / "manifest.json").read_text())["checkpoint_tokenizer"]
    assert "note" not in loaded
    assert loaded["post_processing"].startswith("follows the contract")
    # a direct call matches "<eos>" typed in a text, which the contract takes as text
    assert loaded["special_token_strings"].startswith("matched as control tokens")


SIGLIP2_TOKENIZER_CONFIG = {
    "tokenizer_class": "GemmaTokenizer",
    "add_bos_token": False,
    "add_eos_token": True,
    "padding_side": "right",
    "pad_token": "<pad>",
    "eos_token": "<eos>",
    "bos_token": "<bos>",
    "unk_token": "<unk>",
}


def test_export_never_adds_the_tokens_transformers_adds_when_it_loads_a_tokenizer(
    checkpoint: Path, tmp_path: Path, fp32_bundle: Path
) -> None:
    import shutil

    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    # GIVEN SigLIP 2's tokenizer config on a vocabulary without <mask> (transformers 5's
    # GemmaTokenizer adds one when it loads it: one id past the embedding table)
    source = tmp_path / "gemma-config"
    shutil.copytree(checkpoint, source)
    (source / "tokenizer_config.json").write_text(json.dumps(SIGLIP2_TOKENIZER_CONFIG))
    shipped = Tokenizer.from_file(str(source / "tokenizer.json"))
    loaded = AutoTokenizer.from_pretrained(source)
    assert len(loaded) in (shipped.get_vocab_size(), shipped.get_vocab_size() + 1)

    # WHEN it is exported THEN the bundle has the checkpoint's entries, no more
    assert _export(source, tmp_path / "bundle") == 0
    written = Tokenizer.from_file(str(tmp_path / "bundle" / "tokenizer.json"))
    assert written.get_vocab_size() == shipped.get_vocab_size()
    assert written.token_to_id("<mask>") is None
    ids = _service(tmp_path / "bundle").tokenizer.encode_texts(TEXTS).ids
    assert ids.tolist() == _service(fp32_bundle).tokenizer.encode_texts(TEXTS).ids.tolist()


def test_export_of_a_tokenizer_larger_than_the_embedding_table_names_both_sizes(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from tokenizers import Tokenizer

    # GIVEN a tokenizer.json with two tokens the graph has no embedding row for
    source = tmp_path / "larger"
    shutil.copytree(checkpoint, source)
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    rows = tokenizer.get_vocab_size()
    tokenizer.add_special_tokens(["<extra_a>", "<extra_b>"])
    tokenizer.save(str(source / "tokenizer.json"))

    # THEN the export stops before any graph runs, naming both sizes and the tokens
    assert _export(source, tmp_path / "bundle") == 2
    err = capsys.readouterr().err
    assert f"the tokenizer has {rows + 2:,} entries but the text tower's token embedding " in err
    assert f"table has {rows:,} rows: 2 token(s) have no row" in err
    assert f"{rows} '<extra_a>', {rows + 1} '<extra_b>'" in err
    assert "ONNX Runtime" not in err and "InvalidArgument" not in err
    assert not (tmp_path / "bundle" / "manifest.json").exists()


def test_export_of_a_tokenizer_without_eos_names_the_missing_token(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    # GIVEN a tokenizer.json whose <eos> is spelled otherwise (the graph's contract needs it)
    source = tmp_path / "no-eos"
    shutil.copytree(checkpoint, source)
    data = json.loads((source / "tokenizer.json").read_text())
    data["model"]["vocab"]["</s>"] = data["model"]["vocab"].pop("<eos>")
    for token in data["added_tokens"]:
        if token["content"] == "<eos>":
            token["content"] = "</s>"
    data["post_processor"] = None
    (source / "tokenizer.json").write_text(json.dumps(data))

    # THEN the export names the missing token, never an ONNX Runtime status
    assert _export(source, tmp_path / "bundle") == 2
    err = capsys.readouterr().err
    assert "the tokenizer has no <eos> token: the SigLIP 2 contract ends every text" in err
    assert "ONNX Runtime" not in err
    assert not (tmp_path / "bundle" / "manifest.json").exists()


def test_export_of_a_text_model_alone_records_no_logit_scale(tmp_path: Path) -> None:
    import torch
    from transformers import Siglip2TextConfig, Siglip2TextModel

    from devkit.tiny_checkpoint import checkpoint_tokenizer

    tokenizer = checkpoint_tokenizer()
    torch.manual_seed(0)
    config = Siglip2TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=64,
    )
    Siglip2TextModel(config).save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")

    assert _export(tmp_path / "ckpt", tmp_path / "bundle") == 0
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["architecture"] == "Siglip2TextModel"
    assert manifest["embedding_dimension"] == 16
    assert "logit_scale" not in manifest


def test_external_data_graph_is_one_data_file_that_serve_loads(
    loaded: Any, fp32_bundle: Path, tmp_path: Path
) -> None:
    from siglip_text.tools.export.onnx_export import export_text_tower

    # GIVEN a graph whose weights are stored outside it, as large and so400m need
    bundle = tmp_path / "bundle"
    export_text_tower(loaded.tower, bundle / "text_model.onnx", max_length=64, external_data=True)
    (bundle / "tokenizer.json").write_bytes((fp32_bundle / "tokenizer.json").read_bytes())
    manifest = json.loads((fp32_bundle / "manifest.json").read_text())
    del manifest["files"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))

    # THEN the directory holds exactly one weights file and serve's loader runs it
    assert sorted(p.name for p in bundle.iterdir()) == [
        "manifest.json",
        "text_model.onnx",
        "text_model.onnx.data",
        "tokenizer.json",
    ]
    assert (bundle / "text_model.onnx").stat().st_size < 100_000
    assert (bundle / "text_model.onnx.data").stat().st_mode & 0o044 == 0o044  # others may read
    vectors = _service(bundle).embed_texts(TEXTS).vectors
    reference = _service(fp32_bundle).embed_texts(TEXTS).vectors
    assert np.einsum("ij,ij->i", vectors, reference).min() >= 0.999999


# -- reference and verify ---------------------------------------------------------------


def test_reference_command_writes_ids_and_unit_vectors(
    checkpoint: Path, tmp_path: Path, fp32_service: EmbeddingService
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("a photo of a cat\nA Photo Of A CAT\n\n")
    out = tmp_path / "ref.jsonl"

    status = main(["reference", str(checkpoint), str(texts), "--out", str(out), "--device", "cpu"])

    assert status == 0

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in records] == ["a photo of a cat", "A Photo Of A CAT", ""]
    assert records[0]["input_ids"] == records[1]["input_ids"]
    assert [len(r["input_ids"]) for r in records] == [64, 64, 64]
    assert records[2]["input_ids"][:2] == [1, 0]
    for record in records:
        assert np.linalg.norm(record["embedding"]) == pytest.approx(1.0, abs=1e-6)


def test_verify_passes_on_a_matching_reference(
    fp32_bundle: Path, good_reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = np.random.default_rng(0).normal(size=(200, 32)).astype(np.float32)
    np.save(tmp_path / "images.npy", images)
    report = tmp_path / "report.json"

    status = _verify(
        fp32_bundle, good_reference, "--images", str(tmp_path / "images.npy"), "--json", str(report)
    )

    out = capsys.readouterr().out
    assert status == 0, out
    assert f"{len(TEXTS)}/{len(TEXTS)} texts give identical ids" in out
    assert "PASS: 4/4 checks passed" in out
    checks = {c["name"]: c for c in json.loads(report.read_text())["checks"]}
    assert set(checks) == {"files", "tokenizer", "vectors", "retrieval"}


def test_verify_of_an_int8_bundle_passes_with_an_int8_threshold(
    int8_bundle: Path, good_reference: Path
) -> None:
    assert _verify(int8_bundle, good_reference, "--min-cosine", "0.99") == 0


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("pad id 1", "pads with id 1 = <eos>"),
        ("no lowercasing", "reference text was not lowercased"),
        ("left padding", "left padding"),
    ],
)
def test_verify_fails_and_names_the_mistake_of_a_wrong_reference(
    mistake: str,
    named: str,
    checkpoint: Path,
    loaded: Any,
    fp32_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from transformers import AutoTokenizer

    # GIVEN a reference made by a pipeline with one known mistake
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    lowercase = "unicode"
    if mistake == "pad id 1":
        tokenizer.pad_token = "<eos>"
    elif mistake == "left padding":
        tokenizer.padding_side = "left"
    else:
        lowercase = "none"
    reference = tmp_path / "wrong.jsonl"
    write_jsonl(reference, pipeline_reference(loaded.tower, tokenizer, TEXTS, lowercase=lowercase))

    # WHEN the bundle is verified against it
    status = _verify(fp32_bundle, reference)

    # THEN verify fails and names the cause on each mismatching text
    out = capsys.readouterr().out
    assert status == 1, out
    assert named in out
    assert "tokenizer" in out and "FAIL" in out
    vectors_row = next(line for line in out.splitlines() if line.startswith("vectors"))
    assert vectors_row.rstrip().endswith("FAIL")


def test_verify_exits_2_on_a_reference_without_ids_or_vectors(
    fp32_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = tmp_path / "bad.jsonl"
    reference.write_text('{"text": "a photo of a cat"}\n')

    assert _verify(fp32_bundle, reference) == 2
    assert "neither 'input_ids' nor 'embedding'" in capsys.readouterr().err
