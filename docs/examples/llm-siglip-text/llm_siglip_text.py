"""An `llm` plugin: a siglip-text endpoint as an embedding model.

llm's ``extra-openai-models.yaml`` registers chat models only, so an OpenAI-compatible
embedding endpoint needs a plugin. Install it with ``llm install -e docs/examples/llm-siglip-text``
and set where the endpoint is (the defaults are the demo server's)::

    export SIGLIP_TEXT_BASE_URL=http://127.0.0.1:8000/v1
    export SIGLIP_TEXT_MODEL=siglip-text/synthetic-demo-tiny
    export SIGLIP_TEXT_API_KEY=not-used  # the key where AuthMode=api-key
    export SIGLIP_TEXT_BATCH_SIZE=64  # texts per request, at most the deployment's bound
    llm embed -m siglip-text -c "a red block"
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

import llm
import openai


class SiglipText(llm.EmbeddingModel):  # type: ignore[misc]
    model_id = "siglip-text"
    # Texts per request: at most what the deployment answers (GET /health reports its bound;
    # past it, a 413), which a template deployment sets to 64 by default.
    batch_size = int(os.environ.get("SIGLIP_TEXT_BATCH_SIZE", "64"))

    def embed_batch(self, items: Iterable[str | bytes]) -> Iterator[list[float]]:
        client = openai.OpenAI(
            base_url=os.environ.get("SIGLIP_TEXT_BASE_URL", "http://127.0.0.1:8000/v1"),
            api_key=os.environ.get("SIGLIP_TEXT_API_KEY", "not-used"),
        )
        response = client.embeddings.create(
            model=os.environ.get("SIGLIP_TEXT_MODEL", "siglip-text/synthetic-demo-tiny"),
            input=[item if isinstance(item, str) else item.decode() for item in items],
        )
        return (item.embedding for item in response.data)


@llm.hookimpl  # type: ignore[misc]
def register_embedding_models(register: Callable[[llm.EmbeddingModel], None]) -> None:
    register(SiglipText())
