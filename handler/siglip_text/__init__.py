"""SigLIP 2 text embeddings on CPU with ONNX Runtime, behind an OpenAI-compatible API."""

__version__ = "0.1.0"
