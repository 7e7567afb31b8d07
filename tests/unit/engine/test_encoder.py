from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto
from siglip_text.engine.encoder import OnnxEncoder, SessionConfig, l2_normalize
from siglip_text.engine.errors import InferenceError, ModelLoadError
from siglip_text.engine.service import EmbeddingService

from devkit.graphs import save_graph


def encoder_for(path: Path, *, dimension: int = 32, batch: int = 32) -> OnnxEncoder:
    return OnnxEncoder(
        path,
        output_name="text_embeds",
        dimension=dimension,
        max_length=64,
        config=SessionConfig(intra_op_threads=1, max_batch_size=batch),
    )


def test_vectors_match_pytorch_reference(service: EmbeddingService, reference) -> None:
    texts = [c["text"] for c in reference["cases"]]
    expected = np.array([c["embedding"] for c in reference["cases"]], dtype=np.float64)
    got = service.embed_texts(texts).vectors.astype(np.float64)
    cosine = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= 0.99999, cosine.min()
    assert np.abs(got - expected).max() <= 1e-5


def test_reference_token_ids_give_reference_vectors(service: EmbeddingService, reference) -> None:
    ids = [c["input_ids"] for c in reference["cases"]]
    expected = np.array([c["embedding"] for c in reference["cases"]])
    got = service.embed_token_ids(ids).vectors
    assert np.abs(got - expected).max() <= 1e-5


def test_every_vector_has_unit_norm_in_float32(service: EmbeddingService) -> None:
    vectors = service.embed_texts(["a", "a dog", "🐱" * 100]).vectors
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_batches_larger_than_max_batch_size_give_the_same_vectors(demo_dir: Path, service) -> None:
    small_batches = encoder_for(demo_dir / "text_model.onnx", batch=3)
    ids = service.tokenizer.encode_texts([f"photo number {i}" for i in range(10)]).ids
    np.testing.assert_allclose(small_batches.encode(ids), service.encoder.encode(ids), atol=1e-6)


def test_attention_mask_input_is_fed_all_ones(tmp_path: Path) -> None:
    path = save_graph(tmp_path / "m.onnx", kind="mask-sum", with_attention_mask=True)
    encoder = encoder_for(path)
    ids = np.full((1, 64), 7, dtype=np.int64)
    ids[0, 5:] = 0  # padding that a 0/1 mask would hide
    # raw row = (id + 1) + sum(mask); all ones -> 8 + 64 = 72 in every component.
    session_out = encoder.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    expected = l2_normalize(session_out[0], rows=1, dimension=32)
    np.testing.assert_allclose(encoder.encode(ids), expected)
    assert session_out[0][0, 0] == 72.0


def test_graph_without_input_ids_fails_naming_the_input(tmp_path: Path) -> None:
    path = save_graph(tmp_path / "m.onnx", input_name="tokens")
    with pytest.raises(ModelLoadError, match="no 'input_ids' input.*tokens"):
        encoder_for(path)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ({"input_type": TensorProto.INT32}, "'input_ids' must be int64"),
        ({"max_length": 77}, "takes 77 tokens.*64"),
        ({"dimension": 16}, "dimension 16 but the manifest's embedding_dimension is 32"),
        ({"output_rank": 3}, "must be rank 2"),
        ({"output_name": "last_hidden_state"}, "no output 'text_embeds'.*last_hidden_state"),
    ],
    ids=["input-ids-int32", "length-77", "dimension-16", "rank-3", "output-renamed"],
)
def test_a_graph_off_the_contract_fails_naming_what_differs(
    tmp_path: Path, graph: dict[str, Any], message: str
) -> None:
    path = save_graph(tmp_path / "m.onnx", **graph)
    with pytest.raises(ModelLoadError, match=message):
        encoder_for(path)


def test_file_that_is_not_onnx_fails(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"this is not a protobuf" * 10)
    with pytest.raises(ModelLoadError, match="ONNX Runtime cannot load it"):
        encoder_for(path)


def test_truncated_onnx_file_fails(tmp_path: Path, demo_dir: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes((demo_dir / "text_model.onnx").read_bytes()[:5000])
    with pytest.raises(ModelLoadError, match="ONNX Runtime cannot load it"):
        encoder_for(path)


@pytest.mark.parametrize(("kind", "message"), [("nan", "non-finite"), ("zero", "zero vector")])
def test_graph_emitting_nan_or_zero_is_an_inference_error(
    tmp_path: Path, kind: str, message: str
) -> None:
    encoder = encoder_for(save_graph(tmp_path / "m.onnx", kind=kind))
    with pytest.raises(InferenceError, match=message):
        encoder.encode(np.full((2, 64), 9, dtype=np.int64))


def test_l2_normalize_rejects_wrong_shape() -> None:
    with pytest.raises(InferenceError, match="shape"):
        l2_normalize(np.ones((2, 8), dtype=np.float32), rows=2, dimension=16)


def test_l2_normalize_upcasts_float16_to_float32_unit_vectors() -> None:
    raw = np.array([[3.0, 4.0]], dtype=np.float16)
    out = l2_normalize(raw, rows=1, dimension=2)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8]], atol=1e-6)
