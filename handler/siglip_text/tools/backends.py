"""Where the tools (embed, verify, zero-shot) get vectors: a bundle in process or an endpoint.

``--model-dir`` / ``--demo`` / the ``SIGLIP_*`` variables load a bundle through
``load_service``, exactly as ``serve`` does; ``--url`` sends the texts to a running
OpenAI-compatible endpoint with the official ``openai`` client.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from ..engine.bundle import BundlePaths, Manifest
from ..engine.errors import SiglipError
from ..engine.service import PROBE_TEXT, EmbeddingService
from ..engine.tokenization import SiglipTokenizer
from ..settings import demo_model_dir, load_service, load_settings
from .exit_status import ToolError
from .urls import openai_base_url


class Embedder(Protocol):
    """Unit vectors for texts or token-id rows, from whichever backend.

    A bundle in process also has its files, manifest and tokenizer (for exact checks); an
    endpoint has them as None.
    """

    model_id: str
    dimension: int
    bundle: BundlePaths | None
    manifest: Manifest | None
    tokenizer: SiglipTokenizer | None

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_token_ids(self, rows: Sequence[Sequence[int]]) -> np.ndarray: ...


class LocalEmbedder:
    """A bundle loaded in this process (the same init, checks and probe as ``serve``)."""

    def __init__(self, service: EmbeddingService, *, paths: BundlePaths) -> None:
        self.service = service
        self.bundle: BundlePaths | None = paths
        self.manifest: Manifest | None = service.manifest
        self.tokenizer: SiglipTokenizer | None = service.tokenizer
        self.model_id = service.model_id
        self.dimension = service.dimension

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.service.embed_texts(list(texts)).vectors

    def embed_token_ids(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        return self.service.embed_token_ids([list(r) for r in rows]).vectors


class RemoteEmbedder:
    """A running endpoint, through the ``openai`` client (base64 transfer, retries)."""

    def __init__(self, url: str, *, model: str | None, api_key: str | None) -> None:
        from openai import OpenAI

        self.client = OpenAI(base_url=url, api_key=api_key or "not-used", max_retries=4)
        self.bundle: BundlePaths | None = None
        self.manifest: Manifest | None = None
        self.tokenizer: SiglipTokenizer | None = None
        self.model_id = model or self.client.models.list().data[0].id
        self.dimension = len(self.embed_texts([PROBE_TEXT])[0])

    def _create(self, inputs: Sequence[Any]) -> np.ndarray:
        response = self.client.embeddings.create(model=self.model_id, input=list(inputs))
        rows = sorted(response.data, key=lambda item: item.index)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self._create(texts)

    def embed_token_ids(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        return self._create([list(r) for r in rows])


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model-dir | --demo | --url`` (default: the SIGLIP_* variables), and friends."""
    group = parser.add_argument_group("model (default: the SIGLIP_* variables, as serve)")
    source = group.add_mutually_exclusive_group()
    source.add_argument("--model-dir", type=Path, help="a bundle directory")
    source.add_argument("--demo", action="store_true", help="the bundled demo model")
    source.add_argument(
        "--url",
        help="an OpenAI-compatible endpoint: its base URL, with or without /v1 "
        "(http://host:8000 or http://host:8000/v1)",
    )
    group.add_argument("--model", help="with --url: the model id (default: the served one)")
    group.add_argument("--api-key", help="with --url: the API key (default: $SIGLIP_API_KEY)")
    group.add_argument("--threads", type=int, help="ONNX Runtime threads (in process)")
    group.add_argument(
        "--batch-size", type=int, default=64, help="texts per model call or request (default 64)"
    )


def open_embedder(args: argparse.Namespace) -> Embedder:
    """The backend the arguments name; a bundle that fails its checks is a ToolError."""
    if args.url:
        try:
            import openai  # noqa: F401
        except ImportError:
            raise ToolError(
                "--url needs the openai client of the 'server' extra: pip install -e '.[server]'"
            ) from None
        # One name for every client tool; never OPENAI_API_KEY, which would send a user's
        # OpenAI secret to whatever --url names.
        key = args.api_key or os.environ.get("SIGLIP_API_KEY")
        return RemoteEmbedder(openai_base_url(args.url), model=args.model, api_key=key)
    overrides: dict[str, object] = {"max_text_batch_size": max(1, args.batch_size)}
    if args.demo:
        overrides["model_dir"] = demo_model_dir()
    elif args.model_dir:
        overrides.update(_explicit_paths(args.model_dir))
    if args.threads:
        overrides["ort_intra_op_threads"] = args.threads
    try:
        settings = load_settings(**overrides)
        return LocalEmbedder(load_service(settings), paths=settings.artifact_paths())
    except SiglipError as exc:
        raise ToolError(f"cannot load the model: {exc.message}") from None


def _explicit_paths(directory: Path) -> dict[str, object]:
    """All three artifact paths from one directory, so stray SIGLIP_* paths cannot win."""
    paths = BundlePaths.in_dir(directory)
    return {
        "model_dir": directory,
        "model_manifest_path": paths.manifest,
        "onnx_model_path": paths.onnx,
        "tokenizer_path": paths.tokenizer,
    }


def progress_bar(total: int, *, label: str, enabled: bool = True) -> tqdm[Any]:
    """A progress bar on stderr (tqdm): redrawn in place on a terminal."""
    return tqdm(total=total, desc=label, unit="text", disable=not enabled, file=sys.stderr)


def embed_in_batches(
    embed: Any, items: Sequence[Any], *, batch_size: int, progress: tqdm[Any] | None = None
) -> np.ndarray:
    """Call ``embed`` on consecutive batches and stack the rows, reporting progress."""
    parts = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        parts.append(embed(batch))
        if progress is not None:
            progress.update(len(batch))
    if progress is not None:
        progress.close()
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
