"""SigLIP 2 text embeddings on CPU with ONNX Runtime, behind an OpenAI-compatible API."""

import os

#: The project's version, in one place: pyproject.toml reads it (``dynamic = ["version"]``),
#: and the function image, which has no package metadata, imports it. Every exported
#: manifest records it: bump it whenever export output changes (CHANGELOG.md).
__version__ = "0.6.0"

# onnxruntime 1.32 on Linux writes a device id and an event database under
# ~/.cache/Microsoft/DeveloperTools and uploads telemetry unless this is set
# (microsoft/onnxruntime#27379). Lambda's HOME is read-only, and a query service has no
# business phoning home: off unless the operator sets it explicitly.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
