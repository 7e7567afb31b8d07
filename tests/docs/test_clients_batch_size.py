"""docs/clients.md's "Batch size" table (the anchor a 413 for too many inputs points to) gives
a row for every client the page documents, and a section for each framework it lists."""

from __future__ import annotations

from devkit.paths import ROOT
from devkit.readme import blocks, section, table_rows

CLIENTS_MD = ROOT / "docs" / "clients.md"

#: docs/clients.md's snippets -> the batch-size row (its first cell starts with this)
ROW_OF_SNIPPET = {
    "openai": "openai (Python and Node)",
    "openai-async": "openai (Python and Node)",
    "openai-truncate": "openai (Python and Node)",
    "node-openai": "openai (Python and Node)",
    "langchain": "langchain",
    "llama-index": "llama-index",
    "llama-index-openai-like": "llama-index",
    "litellm": "litellm",
    "haystack": "haystack",
    "chromadb": "chromadb",
    "pydantic-ai": "pydantic-ai",
    "pymilvus": "pymilvus",
    "semantic-router": "semantic-router",
    "llm": "llm",
    "mem0": "mem0",
    "node-vercel-ai": "Vercel AI SDK",
    "node-vercel-ai-openai": "Vercel AI SDK",
    "node-langchain": "LangChain JS",
    "agno": "agno",
    "neo4j-graphrag": "neo4j-graphrag",
    "langchain-localai": "langchain-localai",
    "camel-ai": "camel-ai",
    "lightrag": "LightRAG",
    "chonkie": "chonkie",
    "nvidia": "NVIDIA",
    "crewai": "crewAI",
    "ragas": "ragas",
    "griptape": "griptape",
}


def _first_cells() -> list[str]:
    return [row[0] for row in table_rows(section(CLIENTS_MD, "## Batch size"))]


def test_every_client_snippet_has_a_batch_size_row() -> None:
    snippets = {
        name for name, block in blocks("snippet").items() if block.source.endswith("clients.md")
    }
    # a new client snippet needs its row here (and in the table)
    assert snippets == set(ROW_OF_SNIPPET)
    cells = _first_cells()
    missing = {
        name: row
        for name, row in ROW_OF_SNIPPET.items()
        if not any(cell == row or cell.startswith(f"{row} (") for cell in cells)
    }
    assert not missing, f"no batch-size row for {missing}"


def test_every_batch_size_row_says_what_to_set() -> None:
    for row in table_rows(section(CLIENTS_MD, "## Batch size")):
        name, setting = row
        # a setting (code) or the plain statement that the client has none
        assert "`" in setting or setting.startswith("none"), f"{name}: {setting}"


def test_each_framework_of_more_frameworks_has_a_section_with_its_snippet() -> None:
    more = section(CLIENTS_MD, "## More frameworks")
    frameworks = ["agno", "neo4j-graphrag", "langchain-localai", "camel-ai", "lightrag"]
    frameworks += ["chonkie", "nvidia", "crewai", "ragas", "griptape"]
    for name in frameworks:
        assert f"<!-- snippet: {name} -->" in more, name


def test_clients_that_cannot_work_each_say_what_to_use_instead() -> None:
    cannot = section(CLIENTS_MD, "## Clients that cannot work")
    for heading in (
        "### langchain-community's `OpenAIEmbeddings`",
        "### langroid",
        "### LanceDB tables (the `openai` embedding registry)",
    ):
        text = section(CLIENTS_MD, heading)
        assert heading in cannot
        assert "Use " in text or "Embed with" in text or "embed with" in text, heading
