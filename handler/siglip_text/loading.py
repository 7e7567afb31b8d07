"""The init phase: validate every artifact, build the service, run a real inference probe.

`build_service(manifest, paths, session)` works from a manifest already in memory (export
checks the bundle it is writing this way, before any manifest file exists);
`load_service(settings)` reads the manifest and the settings first. Each raises
ModelLoadError naming the cause, so a bad bundle never serves a request.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from .bundle import BundlePaths, Manifest, check_file, load_manifest
from .config import Settings
from .encoder import OnnxEncoder, SessionConfig
from .service import EmbeddingService, InitTimings
from .tokenization import SiglipTokenizer


def graph_optimization_level(setting: str, manifest: Manifest) -> str:
    """``auto``: a graph that export optimized offline loads without optimizing again."""
    if setting != "auto":
        return setting
    return "disable" if manifest.optimized_offline else "all"


def session_config(settings: Settings, manifest: Manifest) -> SessionConfig:
    """The ONNX Runtime session the settings ask for, for this bundle."""
    return SessionConfig(
        intra_op_threads=settings.intra_op_threads(),
        allow_spinning=settings.ort_allow_spinning,
        max_batch_size=settings.max_text_batch_size,
        graph_optimization=graph_optimization_level(settings.ort_graph_optimization, manifest),
    )


def load_service(settings: Settings) -> EmbeddingService:
    """The init phase as serve and Lambda run it: the manifest named by the settings, then
    `build_service`."""
    started = time.perf_counter()
    paths = settings.artifact_paths()
    manifest = load_manifest(paths.manifest)
    return build_service(
        manifest,
        paths,
        session_config(settings, manifest),
        output_name=settings.onnx_output_name,
        cache_size=settings.cache_size,
        started=started,
    )


def build_service(
    manifest: Manifest,
    paths: BundlePaths,
    session: SessionConfig,
    *,
    output_name: str = "text_embeds",
    cache_size: int = 0,
    started: float | None = None,
) -> EmbeddingService:
    """Files, tokenizer and session (overlapped), then the probe."""
    timings = InitTimings()
    started = time.perf_counter() if started is None else started
    check_file(paths.onnx, "ONNX model", manifest)
    check_file(paths.tokenizer, "tokenizer", manifest)
    for name in manifest.recorded_files():
        # e.g. text_model.onnx.data: a truncated weights file is named here, not deep in ORT
        if name not in (paths.onnx.name, paths.tokenizer.name, paths.manifest.name):
            check_file(paths.onnx.parent / name, "model file", manifest)
    timings.manifest_s = time.perf_counter() - started

    def load_tokenizer() -> SiglipTokenizer:
        began = time.perf_counter()
        tokenizer = SiglipTokenizer.from_file(
            paths.tokenizer, max_length=manifest.text_max_token_length
        )
        timings.tokenizer_s = time.perf_counter() - began
        return tokenizer

    # ONNX Runtime builds the session in a worker thread while this one parses the tokenizer
    # (a 256k-entry tokenizer.json takes 0.6 to 0.8 s here). Both hold the GIL for much of
    # their work, so the overlap is partial: measured on a base bundle, 1.05 s instead of
    # 1.19 s for both (fp32) and 0.81 s instead of 1.00 s (int8); the other order gained
    # nothing.
    def build_encoder() -> OnnxEncoder:
        began = time.perf_counter()
        try:
            return OnnxEncoder(
                paths.onnx,
                output_name=output_name,
                dimension=manifest.embedding_dimension,
                max_length=manifest.text_max_token_length,
                config=session,
            )
        finally:
            timings.session_s = time.perf_counter() - began

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="siglip-init") as pool:
        encoder_future = pool.submit(build_encoder)
        try:
            tokenizer = load_tokenizer()
        finally:
            encoder = encoder_future.result()  # its error first: the graph is checked first
    service = EmbeddingService(
        manifest, tokenizer, encoder, cache_size=cache_size, init_timings=timings
    )
    began = time.perf_counter()
    service.probe()
    timings.probe_s = time.perf_counter() - began
    return service
