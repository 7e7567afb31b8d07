"""ONNX Runtime's offline graph optimizer: the serving session's optimizations, done once at
export and saved, so that no Lambda init repeats them."""

from __future__ import annotations

from pathlib import Path

from ...engine.bundle import OFFLINE_OPTIMIZATION
from .onnx_export import external_data_path


def optimize_graph(path: Path, *, external_data: bool = True) -> None:
    """Apply ONNX Runtime's graph optimizations once, offline, and save in place.

    The serving session then loads the result without optimizing again (the setting
    ``auto``: see ``loading.graph_optimization_level``): fusions such as MatMul+Add,
    LayerNorm, Gelu and the int8 ``DynamicQuantizeMatMul`` are done here, not in every
    Lambda init. Weights go to one ``.data`` file next to the graph, which ONNX Runtime
    memory-maps at load, unless ``external_data`` is False (``--single-file``: one file,
    below protobuf's 2 GB).
    """
    import shutil
    import tempfile

    import onnxruntime as ort

    from ...engine.encoder import OPTIMIZATION_LEVELS

    scratch = Path(tempfile.mkdtemp(prefix=".optimize-", dir=path.parent))
    try:
        staged = scratch / path.name
        options = ort.SessionOptions()
        options.graph_optimization_level = OPTIMIZATION_LEVELS[OFFLINE_OPTIMIZATION]
        options.optimized_model_filepath = str(staged)
        if external_data:
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name",
                external_data_path(staged).name,
            )
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
            )
        options.log_severity_level = 3
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        external_data_path(path).unlink(missing_ok=True)
        if external_data:
            external_data_path(staged).chmod(0o644)
            external_data_path(staged).replace(external_data_path(path))
        staged.chmod(0o644)
        staged.replace(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
