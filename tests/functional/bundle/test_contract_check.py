"""Init checks a bundle against the SigLIP 2 contract and reports its fingerprint
(engine/fingerprint.py), whoever made the bundle.

A bundle in the seed's format (the four-field manifest, a graph with ``input_ids`` and
``attention_mask`` inputs and a ``text_embeds`` output) is served when it conforms, with a
fingerprint computed from what it serves; one whose tokenizer breaks the contract (no
lowercasing, another pad id, special-token strings matched as control tokens) is refused
with the difference named, never served with a wrong vector. A manifest whose contract
record or fingerprint was edited is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from onnx import TensorProto, helper
from siglip_text.engine.bundle import BundlePaths, load_manifest
from siglip_text.engine.errors import ModelLoadError
from siglip_text.engine.fingerprint import fingerprint, served_contract
from siglip_text.engine.service import EmbeddingService
from siglip_text.engine.tokenization import SiglipTokenizer
from siglip_text.http.app import create_app
from siglip_text.settings import load_service, load_settings

from devkit.aws_lambda import built_lambda
from devkit.contracts import contract_document

SEED_FIELDS = ("repository", "revision", "embedding_dimension", "text_max_token_length")
QUERY = "A Kitten On The Beach"


def load(directory: Path) -> EmbeddingService:
    return load_service(load_settings(model_dir=directory, ort_intra_op_threads=1))


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), "utf-8")


def with_attention_mask(source: Path, target: Path) -> None:
    """The graph with an ``attention_mask`` input as the seed's server expects: the output is
    multiplied by the mask's smallest value, so a 0/1 mask (anything but all ones) would
    zero the vector and fail, and all ones leave it as it was."""
    model = onnx.load(str(source))
    graph = model.graph
    (output,) = graph.output
    for node in graph.node:
        node.output[:] = ["unmasked" if name == output.name else name for name in node.output]
    graph.input.append(
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", 64])
    )
    graph.node.extend(
        [
            helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
            helper.make_node("ReduceMin", ["mask_f"], ["mask_min"], axes=[0, 1], keepdims=0),
            helper.make_node("Mul", ["unmasked", "mask_min"], [output.name]),
        ]
    )
    onnx.save(model, str(target))


@pytest.fixture
def seed_bundle(bundle_copy: Path) -> Path:
    """The demo bundle in the seed's format: four manifest fields, a graph with the mask."""
    manifest = read(bundle_copy / "manifest.json")
    write(bundle_copy / "manifest.json", {k: manifest[k] for k in SEED_FIELDS})
    with_attention_mask(bundle_copy / "text_model.onnx", bundle_copy / "text_model.onnx")
    return bundle_copy


def edit_tokenizer(bundle: Path, change: str) -> None:
    path = bundle / "tokenizer.json"
    data = read(path)
    if change == "normalizer removed":
        data["normalizer"] = None
    elif change == "pad id 3":
        ids = {"<pad>": 3, "<unk>": 0}
        for token in data["added_tokens"]:
            token["id"] = ids.get(token["content"], token["id"])
        for token, new in ids.items():
            data["model"]["vocab"][token] = new
    elif change == "eos not special":
        next(t for t in data["added_tokens"] if t["content"] == "<eos>")["special"] = False
    elif change == "dropout":
        data["model"]["dropout"] = 0.1
    write(path, data)


def test_the_demo_reports_a_fingerprint_on_health_and_models(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health["fingerprint"].startswith("sha256:") and len(health["fingerprint"]) == 71
    models = client.get("/v1/models").json()
    assert models["data"][0]["fingerprint"] == health["fingerprint"]


def test_the_fingerprint_is_recomputed_from_the_files_as_the_contract_doc_says(
    demo_dir: Path, service: EmbeddingService
) -> None:
    # GIVEN the demo bundle, exported before bundles recorded a contract: its fingerprint is
    # the one of what it serves. Recomputed here with json and hashlib, from docs/contract.md
    tokenizer = read(demo_dir / "tokenizer.json")
    model = {
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        **tokenizer["model"],
    }
    model["vocab"] = sorted(([t, i] for t, i in model["vocab"].items()), key=lambda p: p[1])
    model["merges"] = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
    fields = ("id", "content", "single_word", "lstrip", "rstrip", "normalized", "special")
    form = {
        "added_tokens": [{k: t[k] for k in fields} for t in tokenizer["added_tokens"]],
        "model": model,
        "normalizer": tokenizer["normalizer"],  # a flat Sequence already
        "pre_tokenizer": tokenizer["pre_tokenizer"],
    }

    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    onnx_sha = hashlib.sha256((demo_dir / "text_model.onnx").read_bytes()).hexdigest()
    manifest = read(demo_dir / "manifest.json")
    document = contract_document(
        repository=manifest["repository"],
        revision=manifest["revision"],
        tokenizer=digest(form),
        lowercase="unicode",
        eos_id=1,
        pad_id=0,
        length=64,
        dimension=32,
        weights=digest([["text_model.onnx", onnx_sha]]),
        weights_of="onnx-files",
    )
    # THEN it is what init reports
    assert service.fingerprint == digest(document)


def test_a_seed_format_bundle_that_conforms_is_served_with_its_fingerprint(
    seed_bundle: Path, service: EmbeddingService
) -> None:
    seed = load(seed_bundle)
    assert seed.encoder.session.get_inputs()[1].name == "attention_mask"
    with TestClient(create_app(seed, load_settings(model_dir=seed_bundle))) as client:
        body = client.post("/v1/embeddings", json={"input": [QUERY]}).json()
        health = client.get("/health").json()
    # the mask fed all ones leaves the demo's vector as it was
    expected = service.embed_texts([QUERY]).vectors[0]
    np.testing.assert_allclose(body["data"][0]["embedding"], expected, atol=1e-6)
    # its own fingerprint: the same tokenizer, but other weights (the graph changed)
    assert health["fingerprint"] == seed.fingerprint != service.fingerprint
    paths = BundlePaths.in_dir(seed_bundle)
    contract = served_contract(load_manifest(paths.manifest), paths, seed.tokenizer)
    assert contract.weights_of == "onnx-files" and contract.lowercase == "unicode"
    assert health["fingerprint"] == fingerprint(contract)


def test_a_tokenizer_files_padding_and_post_processor_are_overridden_by_the_contract(
    seed_bundle: Path, service: EmbeddingService, demo_dir: Path
) -> None:
    # GIVEN a seed bundle whose tokenizer.json pads with id 1 and prepends <bos>
    path = seed_bundle / "tokenizer.json"
    data = read(path)
    data["padding"]["pad_id"] = 1
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": "<bos>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
    }
    write(path, data)
    # WHEN it is served THEN the ids are the contract's: no <bos>, <eos>, then pads of id 0
    seed = load(seed_bundle)
    ids = seed.tokenizer.encode_texts([QUERY]).ids[0]
    assert ids.tolist() == service.tokenizer.encode_texts([QUERY]).ids[0].tolist()
    assert 2 not in ids.tolist() and ids[-1] == 0
    # and the fingerprint ignores what the server does not use
    conforming = seed_bundle.parent / "conforming"
    shutil.copytree(seed_bundle, conforming)
    shutil.copyfile(demo_dir / "tokenizer.json", conforming / "tokenizer.json")
    assert seed.fingerprint == load(conforming).fingerprint


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("normalizer removed", r"does not lowercase \('A Photo' and 'a photo'"),
        ("pad id 3", "<pad> has id 3 and <eos> id 1; the SigLIP 2 contract pads with id 0"),
        ("eos not special", "the text '<eos>' becomes the control token 1"),
        ("dropout", "dropout 0.1"),
    ],
)
def test_a_seed_format_bundle_that_breaks_the_contract_is_refused(
    seed_bundle: Path, change: str, message: str
) -> None:
    # GIVEN the seed-format bundle with its tokenizer changed; today each is served (HTTP
    # 200, a vector that does not match the index)
    edit_tokenizer(seed_bundle, change)
    # WHEN the init runs THEN it refuses, naming the difference
    with pytest.raises(ModelLoadError, match=message):
        load(seed_bundle)


def test_the_demo_with_its_normalizer_removed_is_refused_not_served(bundle_copy: Path) -> None:
    # GIVEN the demo bundle (its manifest says lowercase: unicode) without its normalizer:
    # "A Kitten On The Beach" became other tokens and another vector, with HTTP 200
    edit_tokenizer(bundle_copy, "normalizer removed")
    with pytest.raises(ModelLoadError, match="declares lowercase 'unicode'.*does 'none'"):
        load(bundle_copy)


def test_lambda_init_fails_on_a_bundle_that_breaks_the_contract(bundle_copy: Path) -> None:
    edit_tokenizer(bundle_copy, "normalizer removed")
    with pytest.raises(ModelLoadError, match="lowercase"), built_lambda(bundle_copy):
        pass


def recorded(bundle: Path) -> dict[str, Any]:
    """The bundle's manifest with the contract record and fingerprint of what it serves (as
    export writes them), written back."""
    paths = BundlePaths.in_dir(bundle)
    manifest = load_manifest(paths.manifest)
    tokenizer = SiglipTokenizer.from_file(paths.tokenizer, max_length=64)
    contract = served_contract(manifest, paths, tokenizer)
    data = read(paths.manifest)
    data["contract"] = contract.model_dump(mode="json")
    data["fingerprint"] = fingerprint(contract)
    write(paths.manifest, data)
    return data


def test_a_bundle_that_serves_its_recorded_contract_reports_that_fingerprint(
    bundle_copy: Path,
) -> None:
    data = recorded(bundle_copy)
    assert load(bundle_copy).fingerprint == data["fingerprint"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("fingerprint", "is not the digest of its contract record"),
        ("revision in both", "revision: recorded '0{40}', served '0cd66"),
        ("record dropped", "records a fingerprint without its contract"),
        ("length in both", "length: recorded 32, served 64"),
    ],
)
def test_a_manifest_whose_contract_was_edited_is_refused(
    bundle_copy: Path, edit: str, message: str
) -> None:
    data = recorded(bundle_copy)
    if edit == "fingerprint":
        data["fingerprint"] = "sha256:" + "0" * 64
    elif edit == "record dropped":
        del data["contract"]
    else:
        field = "revision" if edit.startswith("revision") else "length"
        data["contract"][field] = "0" * 40 if field == "revision" else 32
        contract = load_manifest_from(data)
        data["fingerprint"] = fingerprint(contract)
    write(bundle_copy / "manifest.json", data)
    with pytest.raises(ModelLoadError, match=message):
        load(bundle_copy)


def load_manifest_from(data: dict[str, Any]) -> Any:
    from siglip_text.engine.contract import Contract

    return Contract.model_validate(data["contract"])


def test_a_tokenizer_that_is_not_the_recorded_file_is_refused(bundle_copy: Path) -> None:
    # GIVEN a recorded contract and the tokenizer's sha256 recorded, as export writes both
    data = recorded(bundle_copy)
    path = bundle_copy / "tokenizer.json"
    data["files"] = {"tokenizer.json": {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}}
    write(bundle_copy / "manifest.json", data)
    assert load(bundle_copy).fingerprint == data["fingerprint"]
    # WHEN the tokenizer is replaced by one that still lowercases, with another merge list
    tokenizer = read(path)
    tokenizer["model"]["merges"] = tokenizer["model"]["merges"][:-1]
    write(path, tokenizer)
    # THEN the recorded contract cannot be its own
    with pytest.raises(ModelLoadError, match="not the file export wrote"):
        load(bundle_copy)
