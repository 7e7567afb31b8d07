"""What docs/clients.md says of the frameworks beyond the plain OpenAI clients, checked against
a live `siglip-text serve --demo`: each line of configuration it gives is needed (without it
the client fails, or gets another vector), and NVIDIA's NIM fields work.

Their documented snippets themselves run in tests/functional/test_clients.py (as written,
vectors against a direct float request, a newline kept). A client that is not installed skips,
naming its package: most come from the ``clients`` extra, the heavier ones (and chonkie's catsu
backend) from .ci/clients-requirements.txt; crewAI, which cannot share that environment, runs
in a venv of its own (.ci/venvs/crewai, devkit/client_venvs.py) in a subprocess.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from devkit import client_venvs
from devkit.paths import ROOT
from devkit.readme import snippet
from devkit.servers import demo_server, direct_float

pytestmark = [pytest.mark.slow, pytest.mark.clients]  # a server subprocess and the clients

MODEL = "siglip-text/synthetic-demo-tiny"
#: a text past griptape's default chunk size (2,041 tiktoken tokens): about 1,000 tokens of
#: one sentence, then 3,000 of another, so that its second chunk, as long as its first, starts
#: with another text
LONG_TEXT = " ".join(["a red block on a wooden table"] * 140 + ["a robot arm in a lab"] * 500)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def needs(module: str, package: str) -> None:
    if not _installed(module):
        pytest.skip(f"{package} is not installed (docs/clients.md says where it comes from)")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with demo_server() as base:
        yield base


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("AGNO_TELEMETRY", "false")
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _tiktoken_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken's cl100k_base file, from litellm's copy (tests have no network)."""
    if not _installed("litellm"):
        pytest.skip("needs litellm installed (its cached tiktoken file)")
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    monkeypatch.setenv(
        "TIKTOKEN_CACHE_DIR", str(Path(spec.origin).parent / "litellm_core_utils" / "tokenizers")
    )


def cosine(got: object, expected: np.ndarray) -> float:
    vector = np.asarray(got, dtype=np.float64).reshape(-1)
    return float(vector @ expected.reshape(-1) / np.linalg.norm(vector))


# --- agno: dimensions= ------------------------------------------------------------------


def test_agno_without_dimensions_sends_1536_and_gets_a_400_naming_the_width(server: str) -> None:
    needs("agno.knowledge.embedder.openai", "agno")
    from agno.knowledge.embedder.openai import OpenAIEmbedder

    # GIVEN the documented embedder without its dimensions= line
    code = snippet("agno").code
    assert "dimensions=32" in code
    embedder = OpenAIEmbedder(id=MODEL, base_url=f"{server}/v1", api_key="not-used")
    # WHEN it embeds a text, THEN the server refuses OpenAI's 1536, naming the model's 32
    with pytest.raises(Exception, match=r"'dimensions' may only be 32"):
        embedder.get_embedding("a red block")


# --- LightRAG: its packaged openai_embed declares OpenAI's width --------------------------


def test_lightrag_packaged_openai_embed_declares_1536_dimensions() -> None:
    needs("lightrag.llm.openai", "lightrag-hku")
    from lightrag.llm.openai import openai_embed

    # the reason docs/clients.md wraps openai_embed.func in an EmbeddingFunc of its own
    assert openai_embed.embedding_dim == 1536
    assert "embedding_dim=32" in snippet("lightrag").code


# --- griptape: tokenizer=None -----------------------------------------------------------


def test_griptape_default_tokenizer_averages_chunks_and_none_sends_the_text(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs("griptape.drivers.embedding.openai", "griptape")
    _tiktoken_cache(monkeypatch)
    from griptape.drivers.embedding.openai import OpenAiEmbeddingDriver

    expected = direct_float(server, [LONG_TEXT])
    # GIVEN griptape's driver with its default tokenizer (tiktoken, 2,041 tokens a chunk)
    default = OpenAiEmbeddingDriver(model=MODEL, base_url=f"{server}/v1", api_key="not-used")
    # WHEN it embeds a text longer than that, THEN it gets an average of its chunks' vectors
    assert cosine(default.embed(LONG_TEXT), expected) < 0.99
    # and with tokenizer=None, as documented, the text's own vector (the server cuts it)
    assert "tokenizer=None" in snippet("griptape").code
    whole = OpenAiEmbeddingDriver(
        model=MODEL, base_url=f"{server}/v1", api_key="not-used", tokenizer=None
    )
    assert cosine(whole.embed(LONG_TEXT), expected) >= 0.999999


# --- chonkie: OpenAIEmbeddings ignores base_url ------------------------------------------


def test_chonkie_openai_embeddings_ignores_base_url_as_the_docs_warn() -> None:
    needs("chonkie", "chonkie")
    needs(
        "catsu",
        "catsu (chonkie[catsu], its OpenAIEmbeddings backend; .ci/clients-requirements.txt)",
    )
    from chonkie import OpenAIEmbeddings

    # GIVEN chonkie's OpenAIEmbeddings given a base_url (port 9: nothing is sent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        OpenAIEmbeddings(
            model="text-embedding-3-small", base_url="http://127.0.0.1:9/v1", api_key="sk-test"
        )
    # THEN all it says is a DeprecationWarning (hidden by default) that it ignores it
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("base_url" in message and "ignored" in message for message in said), said


# --- crewAI: model_name, not model -------------------------------------------------------


#: build_embedder given "model" (port 9: the failure comes before any request), in crewAI's venv
CREWAI_MODEL_KEY = f"""
from crewai.rag.embeddings.factory import build_embedder

config = {{"model": {MODEL!r}, "api_base": "http://127.0.0.1:9/v1", "api_key": "not-used"}}
try:
    build_embedder({{"provider": "openai", "config": config}})
except TypeError as error:
    print("TypeError:", error)
else:
    print("no error")
"""


def test_crewai_model_key_fails_and_model_name_is_the_documented_key(tmp_path: Path) -> None:
    reason = client_venvs.missing("crewai")
    if reason is not None:
        pytest.skip(reason)
    code = snippet("crewai").code
    assert '"model_name":' in code
    # GIVEN crewAI's build_embedder given "model", WHEN it builds the embedder
    done = client_venvs.run("crewai", CREWAI_MODEL_KEY, tmp_path)
    # THEN it refuses the key: "model_name", as documented, is the one it takes
    assert done.returncode == 0, done.stderr[-4000:]
    assert "TypeError:" in done.stdout, done.stdout
    assert "unexpected keyword argument 'model'" in done.stdout, done.stdout


# --- NVIDIA: NIM's truncate --------------------------------------------------------------


def nvidia(base: str, **options: str) -> Any:
    from langchain_nvidia_ai_endpoints import NVIDIAEmbeddings

    return NVIDIAEmbeddings(base_url=f"{base}/v1", model=MODEL, api_key="not-used", **options)


def test_nvidia_default_truncate_none_refuses_a_long_text(server: str) -> None:
    needs("langchain_nvidia_ai_endpoints", "langchain-nvidia-ai-endpoints")
    long_text = "a red block on a table " * 20  # past the demo's 64 tokens
    # GIVEN NVIDIAEmbeddings as documented: it sends NIM's "truncate": "NONE"
    # WHEN it embeds a text longer than the model's limit, THEN the server refuses it (400)
    with pytest.raises(Exception, match=r"\[400\]"):
        nvidia(server).embed_documents(["a red block", long_text])


def test_nvidia_truncate_end_gets_the_cut_texts_vector(server: str) -> None:
    needs("langchain_nvidia_ai_endpoints", "langchain-nvidia-ai-endpoints")
    long_text = "a red block on a table " * 20
    # GIVEN NVIDIAEmbeddings with truncate="END", as docs/clients.md advises for long texts
    got = nvidia(server, truncate="END").embed_documents([long_text])
    # THEN it gets the vector the server gives the text (cut to its first tokens, as default)
    assert cosine(got, direct_float(server, [long_text])) >= 0.999999


def test_nvidia_query_sends_input_type_query_and_gets_the_same_vector(server: str) -> None:
    needs("langchain_nvidia_ai_endpoints", "langchain-nvidia-ai-endpoints")
    # SigLIP has one text tower: a query and a passage of the same text are one vector
    got = nvidia(server).embed_query("a red block")
    assert cosine(got, direct_float(server, ["a red block"])) >= 0.999999


# --- batch size: each documented setting keeps a client under the deployment's bound -----

#: the bound of the small server below, and more texts than it takes
BOUND = 4
BATCH_TEXTS = [f"a red block number {n}" for n in range(10)]


@pytest.fixture(scope="module")
def small_server() -> Iterator[str]:
    with demo_server(SIGLIP_MAX_INPUTS_PER_REQUEST=str(BOUND)) as base:
        yield base


def _langchain(base: str, batch: int | None) -> Any:
    from langchain_openai import OpenAIEmbeddings

    options = {} if batch is None else {"chunk_size": batch}
    embeddings = OpenAIEmbeddings(
        model=MODEL,
        base_url=f"{base}/v1",
        api_key="not-used",
        check_embedding_ctx_length=False,
        max_retries=0,
        **options,  # type: ignore[arg-type]
    )
    return embeddings.embed_documents(BATCH_TEXTS)


def _llama_index(base: str, batch: int | None) -> Any:
    from llama_index.embeddings.openai import OpenAIEmbedding

    options = {} if batch is None else {"embed_batch_size": batch}
    model = OpenAIEmbedding(
        model_name=MODEL, api_base=f"{base}/v1", api_key="not-used", max_retries=0, **options
    )
    return model.get_text_embedding_batch(BATCH_TEXTS)


def _haystack(base: str, batch: int | None) -> Any:
    from haystack import Document
    from haystack.components.embedders import OpenAIDocumentEmbedder
    from haystack.utils import Secret

    options = {} if batch is None else {"batch_size": batch}
    embedder = OpenAIDocumentEmbedder(
        model=MODEL,
        api_base_url=f"{base}/v1",
        api_key=Secret.from_token("not-used"),
        max_retries=0,
        progress_bar=False,
        raise_on_failure=True,  # else a refused batch is logged and its vectors left None
        **options,  # type: ignore[arg-type]
    )
    documents = embedder.run(documents=[Document(content=text) for text in BATCH_TEXTS])
    return [document.embedding for document in documents["documents"]]


def _nvidia(base: str, batch: int | None) -> Any:
    options = {} if batch is None else {"max_batch_size": batch}
    return nvidia(base, **options).embed_documents(BATCH_TEXTS)


def _llm(base: str, batch: int | None) -> Any:
    """The llm plugin docs/examples ships, loaded afresh: it reads its batch size at import."""
    plugin = ROOT / "docs" / "examples" / "llm-siglip-text" / "llm_siglip_text.py"
    env = {"SIGLIP_TEXT_BASE_URL": f"{base}/v1"}
    if batch is not None:
        env["SIGLIP_TEXT_BATCH_SIZE"] = str(batch)
    with mock.patch.dict(os.environ, env):
        spec = importlib.util.spec_from_file_location("llm_siglip_text_fresh", plugin)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.SiglipText()
        return list(model.embed_multi(BATCH_TEXTS))


#: client -> (the module it needs, its package, a call with the batch-size setting or without)
BATCHING = {
    "langchain": ("langchain_openai", "langchain-openai", _langchain),
    "llama-index": ("llama_index.embeddings.openai", "llama-index-embeddings-openai", _llama_index),
    "haystack": ("haystack", "haystack-ai", _haystack),
    "nvidia": ("langchain_nvidia_ai_endpoints", "langchain-nvidia-ai-endpoints", _nvidia),
    "llm": ("llm", "llm", _llm),
}


@pytest.mark.parametrize("name", list(BATCHING))
def test_batch_size_setting_keeps_a_client_under_the_bound(
    server: str, small_server: str, name: str
) -> None:
    module, package, embed = BATCHING[name]
    needs(module, package)
    # GIVEN a deployment that answers at most 4 inputs a request, and 10 texts
    # WHEN the client sends them with its defaults, THEN it is refused (one request of 10)
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own type
        embed(small_server, None)
    # WHEN it is given the batch-size setting docs/clients.md names, set to the bound
    got = np.asarray(embed(small_server, BOUND), dtype=np.float64)
    # THEN it gets every vector, the ones an unbounded server gives
    expected = direct_float(server, BATCH_TEXTS)
    assert got.shape == expected.shape
    cosines = np.einsum("ij,ij->i", got, expected) / np.linalg.norm(got, axis=1)
    assert cosines.min() >= 0.999999
