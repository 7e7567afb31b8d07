"""The cause of every 5xx is logged at ERROR for the operator (ONNX Runtime's message, or the
output check that failed), never the query text; the client sees a generic message."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from fastapi.testclient import TestClient
from onnx import TensorProto, helper, numpy_helper
from siglip_text.engine.encoder import OnnxEncoder, SessionConfig
from siglip_text.engine.service import EmbeddingService
from siglip_text.http.app import create_app
from siglip_text.settings import load_settings

from devkit.graphs import save_graph

QUERY = "my private query about a red block"
GENERIC = "The server had an error while processing your request."


def gather_graph(path: Path, rows: int = 8, dimension: int = 32) -> Path:
    """input_ids -> sum over positions of a ``rows``-row table: ids >= rows fail in ORT."""
    table = numpy_helper.from_array(np.ones((rows, dimension), dtype=np.float32), "table")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["rows"]),
            helper.make_node("ReduceSum", ["rows", "axes"], ["text_embeds"], keepdims=0),
        ],
        "gather",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 64])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", dimension])],
        initializer=[table, axes],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def client_on(graph: Path, service: EmbeddingService) -> TestClient:
    encoder = OnnxEncoder(
        graph,
        output_name="text_embeds",
        dimension=32,
        max_length=64,
        config=SessionConfig(intra_op_threads=1),
    )
    served = EmbeddingService(service.manifest, service.tokenizer, encoder)
    return TestClient(create_app(served, load_settings()))


def errors_logged(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def error_logged_for_a_500(client: TestClient, caplog: Any) -> logging.LogRecord:
    """The one ERROR record a request that fails with the generic 500 leaves, the query text
    in none of the logs."""
    with caplog.at_level(logging.INFO):
        response = client.post("/v1/embeddings", json={"input": [QUERY]})
    assert response.status_code == 500 and response.json()["error"]["message"] == GENERIC
    (record,) = errors_logged(caplog)
    assert "private query" not in caplog.text
    return record


def test_an_onnx_runtime_failure_logs_its_message_at_error(
    service: EmbeddingService, tmp_path: Path, caplog: Any
) -> None:
    client = client_on(gather_graph(tmp_path / "g.onnx"), service)
    message = error_logged_for_a_500(client, caplog).getMessage()
    assert "ONNX Runtime failed" in message and "Gather" in message, message
    assert "idx=<n>" in message  # the token id it quotes is hidden


def test_a_failed_output_check_logs_which_check_at_error(
    service: EmbeddingService, tmp_path: Path, caplog: Any
) -> None:
    client = client_on(save_graph(tmp_path / "nan.onnx", kind="nan"), service)
    assert "non-finite value" in error_logged_for_a_500(client, caplog).getMessage()


class FaultyService(EmbeddingService):
    """A bug past the model: an exception whose message quotes the input."""

    def embed(self, inputs: Any, deadline: Any = None, **options: Any) -> Any:
        raise ValueError(f"cannot handle {inputs.items[0]!r}")


def test_an_unexpected_error_logs_its_type_and_a_scrubbed_message(
    service: EmbeddingService, caplog: Any
) -> None:
    faulty = FaultyService(service.manifest, service.tokenizer, service.encoder)
    record = error_logged_for_a_500(TestClient(create_app(faulty, load_settings())), caplog)
    message = record.getMessage()
    assert "ValueError" in message and "cannot handle <quoted>" in message, message
    assert record.exc_info is None  # no traceback: its last line would repeat the message
