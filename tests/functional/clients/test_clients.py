"""The documentation's client snippets (docs/clients.md, and the README's first example), run
as written against a live `siglip-text serve --demo`.

Each Python snippet is executed (the docs' base URL swapped for the live server's) and
its ``vectors`` are compared with a direct ``encoding_format="float"`` request for the same
texts. The clients come from the ``clients`` extra (the heavier ones from .ci/run's clients
step); a missing one skips its test, naming it. crewAI and camel-ai cannot share that
environment: their snippets run in a venv of their own each (.ci/venvs, made by .ci/run's
client venvs step; devkit/client_venvs.py) in a subprocess. The Node snippets run when node
and their npm packages (installed by .ci/run into .ci/node) are present. A client that gets an
error (a 400 for a field the server refuses) raises it, so its test fails with the server's
message. Nothing leaves the loopback interface: the clients' own network habits (litellm's
price list, telemetry) are turned off through their documented variables.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from devkit import client_venvs
from devkit.paths import ROOT
from devkit.readme import README_BASE_URL, blocks, output, snippet
from devkit.servers import demo_server, direct_float

pytestmark = [pytest.mark.slow, pytest.mark.clients]  # a server subprocess and every client library


NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
MODEL = "siglip-text/synthetic-demo-tiny"
TEXTS = ["a red block", "a robot arm"]

#: snippet -> the module it needs (from the clients extra; for those of
#: client_venvs.PACKAGES, in their own venv)
PYTHON_CLIENTS = {
    "openai": "openai",
    "openai-async": "openai",
    "openai-truncate": "openai",
    "langchain": "langchain_openai",
    "llama-index": "llama_index.embeddings.openai",
    "llama-index-openai-like": "llama_index.embeddings.openai_like",
    "litellm": "litellm",
    "haystack": "haystack",
    "chromadb": "chromadb",
    "pydantic-ai": "pydantic_ai.embeddings.openai",
    "pymilvus": "pymilvus.model.dense",
    "semantic-router": "semantic_router.encoders",
    "llm": "llm",
    "mem0": "mem0",
    "agno": "agno.knowledge.embedder.openai",
    "neo4j-graphrag": "neo4j_graphrag.embeddings",
    "langchain-localai": "langchain_localai",
    "camel-ai": "camel.embeddings",
    "lightrag": "lightrag.llm.openai",
    "chonkie": "chonkie",
    "nvidia": "langchain_nvidia_ai_endpoints",
    "crewai": "crewai",
    "ragas": "ragas.embeddings",
    "griptape": "griptape.drivers.embedding.openai",
}
#: where a Python client comes from: the clients extra, or .ci/run for the heavy ones
EXTRA = "pip install -e '.[clients]'"
HEAVY = ("pymilvus", "semantic-router", "mem0", "lightrag", "ragas")
INSTALLED_BY = {name: "pip install -r .ci/clients-requirements.txt" for name in HEAVY}
#: Node snippet -> the npm packages it needs (.ci/run installs them into .ci/node)
NODE_CLIENTS = {
    "node-openai": ["openai"],
    "node-vercel-ai": ["ai", "@ai-sdk/openai-compatible"],
    "node-vercel-ai-openai": ["ai", "@ai-sdk/openai"],
    "node-langchain": ["@langchain/openai"],
}
#: The texts a snippet embeds where they are not TEXTS: a newline, which a client that
#: rewrites the text would lose
NEWLINE = "line one\nline two"
SNIPPET_TEXTS = {"node-langchain": ["a red block", NEWLINE]}
#: the llm plugin docs/clients.md ships (llm install -e docs/examples/llm-siglip-text)
LLM_PLUGIN = ROOT / "docs" / "examples" / "llm-siglip-text"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(autouse=True)
def _clients_stay_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # litellm fetches its model price list from GitHub at import unless told not to.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")  # chromadb
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CHROMA_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))  # not the home directory
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm"))
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")  # crewAI's tracing
    monkeypatch.setenv("AGNO_TELEMETRY", "false")
    cache = tiktoken_cache()
    if cache is not None:
        # chonkie loads tiktoken's cl100k_base at construction: litellm ships a copy
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    for name in (
        "SIGLIP_TEXT_BASE_URL",
        "SIGLIP_TEXT_MODEL",
        "SIGLIP_TEXT_API_KEY",
        "SIGLIP_TEXT_BATCH_SIZE",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def llm_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shipped llm plugin, registered as `llm install` would (by its entry point)."""
    import llm.plugins

    monkeypatch.syspath_prepend(str(LLM_PLUGIN))
    module = importlib.import_module("llm_siglip_text")
    llm.plugins.pm.register(module, name="siglip_text")
    try:
        yield
    finally:
        llm.plugins.pm.unregister(module)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    # token ids accepted (the default refuses them): the accept case below needs it, and
    # every other test here sends text
    with demo_server(SIGLIP_TOKEN_ID_INPUTS="accept") as base:
        yield base


@pytest.fixture(scope="module")
def rejecting_server() -> Iterator[str]:
    with demo_server(SIGLIP_TOKEN_ID_INPUTS="reject") as base:
        yield base


def snippet_code(name: str, base: str, texts: str | None = None) -> str:
    """A documented snippet's code against ``base``; ``texts``, a Python list literal,
    replaces the one it embeds."""
    code = snippet(name).against(base)
    if texts is not None:
        documented = repr(TEXTS).replace("'", '"')
        assert documented in code, f"{name}: does not embed {documented}"
        code = code.replace(documented, texts)
    return code


def run_python(name: str, base: str, texts: str | None = None) -> tuple[dict[str, Any], str]:
    """Execute a documented snippet against ``base``; its namespace and what it printed.
    ``texts``, a Python list literal, replaces the one the snippet embeds."""
    block = snippet(name)
    code = snippet_code(name, base, texts)
    namespace: dict[str, Any] = {"__name__": f"readme_{name.replace('-', '_')}"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{block.source} <!-- snippet: {name} -->", "exec"), namespace)
    return namespace, printed.getvalue()


def snippet_vectors(
    name: str, base: str, tmp_path: Path, texts: str | None = None
) -> tuple[Any, str]:
    """A documented snippet's ``vectors`` and what it printed, run in this process or, for a
    client of a venv of its own, in that venv's python."""
    if name in client_venvs.PACKAGES:
        return client_venvs.snippet_vectors(name, snippet_code(name, base, texts), tmp_path)
    namespace, printed = run_python(name, base, texts)
    return namespace["vectors"], printed


def needs_python_client(name: str, request: pytest.FixtureRequest) -> None:
    """Skip, naming where it comes from, unless the client of snippet ``name`` is installed
    (or its venv made); for llm, register the plugin the docs ship."""
    if name in client_venvs.PACKAGES:
        reason = client_venvs.missing(name)
        if reason is not None:
            pytest.skip(reason)
        return
    if not _installed(PYTHON_CLIENTS[name]):
        pytest.skip(f"{PYTHON_CLIENTS[name]} is not installed ({INSTALLED_BY.get(name, EXTRA)})")
    if name == "llm":
        request.getfixturevalue("llm_plugin")


def cosines(got: Any, expected: np.ndarray) -> np.ndarray:
    vectors = np.asarray(got, dtype=np.float64)
    assert vectors.shape == expected.shape
    return np.einsum("ij,ij->i", vectors, expected) / np.linalg.norm(vectors, axis=1)


def test_every_snippet_in_the_docs_has_a_test() -> None:
    in_readme = {"rank-captions", "set-up-and-test"}  # the latter: .ci/run's first step
    # docs/deploy-observability.md's Logs Insights queries (tests/docs/test_observability_docs.py)
    in_deploy = {
        "logs-slowest-queries",
        "logs-slowest-invocations",
        "logs-refused-requests",
        "logs-gateway-refusals",
    }
    in_bulk = {"bulk-embed-local"}  # docs/bulk.md's command: tests/docs/test_bulk_docs.py
    tested = {*PYTHON_CLIENTS, *NODE_CLIENTS, *in_readme, *in_deploy, *in_bulk}
    found = blocks("snippet")
    assert set(found) == tested
    assert set(blocks("output")) == {"rank-captions"}
    # the README's demo shows the first example; docs/clients.md holds every client's
    sources = {name: "docs/clients.md" for name in tested}
    sources.update({name: "README.md" for name in in_readme})
    sources.update({name: "docs/deploy-observability.md" for name in in_deploy})
    sources.update({name: "docs/bulk.md" for name in in_bulk})
    assert {name: block.source for name, block in found.items()} == sources


@pytest.mark.parametrize("name", list(PYTHON_CLIENTS))
def test_python_client_snippet_gives_the_direct_float_vectors(
    server: str, name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    needs_python_client(name, request)
    # GIVEN the documented snippet for this client, pointed at a live demo server
    expected = direct_float(server, TEXTS)
    # WHEN it runs as written
    vectors, printed = snippet_vectors(name, server, tmp_path)
    # THEN its vectors are the ones a direct float request returns, and it says what it got
    assert cosines(vectors, expected).min() >= 0.999999
    assert printed.strip() == "2 vectors of 32"


def test_llama_index_model_argument_refuses_the_id_as_the_docs_say() -> None:
    if not _installed("llama_index.embeddings.openai"):
        pytest.skip("llama-index-embeddings-openai is not installed")
    from llama_index.embeddings.openai import OpenAIEmbedding

    # model= takes OpenAI's names only; it fails at construction (port 9: nothing is sent)
    with pytest.raises(ValueError, match="is not a valid OpenAIEmbeddingModelType"):
        OpenAIEmbedding(model=MODEL, api_base="http://127.0.0.1:9/v1", api_key="not-used")


def run_node(name: str, base: str, tmp_path: Path, code: str | None = None) -> np.ndarray:
    """Run a documented Node snippet (or ``code``, a variant of it) against ``base``; its
    vectors. Skips where node or one of its npm packages is missing."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the Node clients are tested where it is)")
    for package in NODE_CLIENTS[name]:
        if not (NODE_MODULES / package).is_dir():
            pytest.skip(f"the {package} npm package is not in {NODE_MODULES} (.ci/run installs it)")
    (tmp_path / "node_modules").symlink_to(NODE_MODULES)
    script = tmp_path / "embed.mjs"
    # The documented code as written, plus one line that hands its vectors to this test.
    script.write_text(
        (code or snippet(name).code).replace(README_BASE_URL, base)
        + "console.log(JSON.stringify(vectors));\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [node, str(script)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    # an error from the server (a refused field, say) ends the script: its message is here
    assert done.returncode == 0, done.stderr
    said, vectors = done.stdout.strip().split("\n")
    assert said == "2 vectors of 32"
    return np.array(json.loads(vectors), dtype=np.float64)


@pytest.mark.node
@pytest.mark.parametrize("name", list(NODE_CLIENTS))
def test_node_client_snippet_gives_the_direct_float_vectors(
    server: str, name: str, tmp_path: Path
) -> None:
    texts = SNIPPET_TEXTS.get(name, TEXTS)
    # GIVEN the documented snippet, pointed at a live demo server; WHEN it runs as written
    got = run_node(name, server, tmp_path)
    # THEN its vectors are the ones a direct float request returns for the same texts
    assert cosines(got, direct_float(server, texts)).min() >= 0.999999


# --- clients that rewrite the text ------------------------------------------------------


@pytest.mark.node
def test_langchain_js_default_strips_newlines_and_changes_the_vector(
    server: str, tmp_path: Path
) -> None:
    # GIVEN the LangChain JS snippet without its stripNewLines: false line (the default)
    code = snippet("node-langchain").code
    setting = "  stripNewLines: false, // send the text as it is\n"
    assert setting in code
    # WHEN it embeds a text with a newline
    got = run_node("node-langchain", server, tmp_path, code.replace(setting, ""))
    # THEN the server embedded another text: the newline became a space
    assert cosines(got[1:], direct_float(server, [NEWLINE]))[0] < 0.9
    assert cosines(got[1:], direct_float(server, ["line one line two"]))[0] >= 0.999999


#: the Python clients that replace each newline with a space before sending, as
#: docs/clients.md warns (none has a setting to stop it)
REWRITE_NEWLINES = {"llama-index", "llama-index-openai-like", "mem0"}


@pytest.mark.parametrize("name", list(PYTHON_CLIENTS))
def test_python_client_sends_newlines_as_the_docs_say(
    server: str, name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    needs_python_client(name, request)
    # GIVEN the documented snippet, WHEN it embeds a text with a newline
    vectors, _ = snippet_vectors(name, server, tmp_path, texts=f"[{TEXTS[0]!r}, {NEWLINE!r}]")
    got = vectors[1:]
    as_sent = direct_float(server, [NEWLINE])
    if name in REWRITE_NEWLINES:
        # THEN a client that rewrites the text gets another text's vector: the docs warn
        assert cosines(got, as_sent)[0] < 0.9
        assert cosines(got, direct_float(server, ["line one line two"]))[0] >= 0.999999
    else:
        # THEN any other gets the text's own vector
        assert cosines(got, as_sent)[0] >= 0.999999


def test_mem0_common_1536_dims_get_a_400_naming_the_model_width(server: str) -> None:
    if not _installed("mem0"):
        pytest.skip("mem0ai is not installed (.ci/run's clients step)")
    import openai

    namespace, _ = run_python("mem0", server)
    config = {**namespace["config"], "embedding_dims": 1536}
    embedder = namespace["EmbedderFactory"].create("openai", config, None)
    with pytest.raises(openai.BadRequestError) as raised:
        embedder.embed("a red block")
    error = raised.value.body
    assert isinstance(error, dict) and error["param"] == "dimensions"
    assert "32" in error["message"]


def test_pymilvus_dim_without_dimensions_raises_as_the_docs_say() -> None:
    if not _installed("pymilvus.model.dense"):
        pytest.skip("pymilvus-model is not installed (.ci/run's clients step)")
    from pymilvus.model.dense import OpenAIEmbeddingFunction

    # port 9: nothing is sent; .dim looks the name up in OpenAI's own table
    embed = OpenAIEmbeddingFunction(
        model_name=MODEL, base_url="http://127.0.0.1:9/v1", api_key="not-used"
    )
    with pytest.raises(KeyError):
        _ = embed.dim


def test_first_example_ranks_the_paraphrase_first(server: str) -> None:
    # GIVEN the README's first example: a query and five captions, one of them a paraphrase
    if not _installed("openai"):
        pytest.skip("openai is not installed")
    # WHEN it runs against the demo model
    _, printed = run_python("rank-captions", server)
    rows = [re.fullmatch(r"\s*(-?\d+\.\d+)  (.+)", line) for line in printed.splitlines()]
    assert all(rows), printed
    scores = [float(row[1]) for row in rows if row]
    captions = [row[2] for row in rows if row]
    # THEN the paraphrase ("puppy on the shore" ~ "dog at the beach") is first, far ahead
    assert captions[0] == "a photo of a dog at the beach"
    assert scores[0] >= 0.8 and scores[0] - scores[1] >= 0.2, printed
    # and the README shows what the code prints (scores to their printed precision)
    shown = [line.split(None, 1) for line in output("rank-captions").code.splitlines()]
    assert [caption for _, caption in shown] == captions
    assert np.allclose([float(score) for score, _ in shown], scores, atol=0.0015)


# --- the token-id trap -------------------------------------------------------------------


def tiktoken_cache() -> Path | None:
    """litellm's folder holding tiktoken's cl100k_base file, where litellm is installed."""
    if not _installed("litellm"):
        return None
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    cache = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    # tiktoken names a cached file after the sha1 of its download URL
    url = b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    return cache if (cache / hashlib.sha1(url).hexdigest()).is_file() else None


def _tiktoken_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangChain's default path needs tiktoken's cl100k_base file; litellm ships a cached one."""
    if not (_installed("langchain_openai") and _installed("litellm")):
        pytest.skip("needs langchain-openai and litellm (its cached tiktoken file) installed")
    cache = tiktoken_cache()
    if cache is None:
        pytest.skip("no cached cl100k_base file in litellm (tests have no network)")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))


def langchain(base: str, **options: Any) -> Any:
    from langchain_openai import OpenAIEmbeddings

    return OpenAIEmbeddings(
        model=MODEL, base_url=f"{base}/v1", api_key="not-used", max_retries=0, **options
    )


def langchain_refusal(base: str) -> dict[str, Any]:
    """The 400's error body LangChain's default call (it sends tiktoken ids) gets at ``base``."""
    import openai

    with pytest.raises(openai.BadRequestError) as raised:
        langchain(base).embed_documents(TEXTS)
    error = raised.value.body
    assert raised.value.status_code == 400 and isinstance(error, dict)
    return error


def test_langchain_default_call_against_reject_gets_a_400_naming_the_fix(
    rejecting_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tiktoken_offline(monkeypatch)
    # GIVEN an endpoint with SIGLIP_TOKEN_ID_INPUTS=reject and LangChain's default settings
    # WHEN LangChain embeds text: THEN a 400 says why and names the setting that fixes it
    error = langchain_refusal(rejecting_server)
    assert error["code"] == "token_ids_rejected"
    assert "check_embedding_ctx_length=False" in error["message"]
    assert "SIGLIP_TOKEN_ID_INPUTS=reject" in error["message"]


def test_langchain_with_the_fix_against_reject_gets_the_right_vectors(
    rejecting_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tiktoken_offline(monkeypatch)
    expected = direct_float(rejecting_server, TEXTS)
    got = langchain(rejecting_server, check_embedding_ctx_length=False).embed_documents(TEXTS)
    assert cosines(got, expected).min() >= 0.999999


def test_langchain_default_call_against_accept_names_the_likely_cause(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tiktoken_offline(monkeypatch)
    # GIVEN accept: cl100k ids of these texts exceed the demo's 990-entry vocabulary
    error = langchain_refusal(server)
    # THEN the out-of-vocabulary message names LangChain's setting as the likely cause
    assert error["code"] == "invalid_input"
    assert "outside the vocabulary" in error["message"]
    assert "check_embedding_ctx_length=False" in error["message"]
