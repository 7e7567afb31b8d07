"""The fusible tower: a transformers SigLIP / SigLIP 2 text transformer rewritten in PyTorch
as the shape ONNX Runtime's fusions recognise, last layer at the pooled position only (see
`tower_graph` for why and how it is fused). Needs torch (the export extra).
"""

from __future__ import annotations

import math
from typing import Any

#: The position SigLIP pools: the last one (big_vision, transformers), usually a pad.
POOLED_POSITION = -1


def fusible_tower(tower: Any) -> Any:
    """`FusibleTextTower` around a transformers SigLIP / SigLIP 2 text transformer."""
    import torch

    class FusibleTextTower(torch.nn.Module):
        """``input_ids [b, L]`` -> the pooled output after the head, as transformers computes
        it (no attention mask), with the last layer restricted to the pooled position."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            inner = _transformer(inner)
            self.embeddings = inner.embeddings
            self.layers = inner.encoder.layers
            self.final_layer_norm = inner.final_layer_norm
            self.head = inner.head

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.embeddings(input_ids=input_ids)
            for layer in self.layers[:-1]:
                # update + residual, not residual + update (the same sum): the fusion follows
                # the first Add among a LayerNorm's parents, which must be the update's bias
                # Add, not the embeddings' Add feeding the first layer's residual.
                hidden = _attention(layer.self_attn, layer.layer_norm1(hidden), None) + hidden
                hidden = layer.mlp(layer.layer_norm2(hidden)) + hidden
            last = self.layers[-1]
            # Keys and values for every position, everything else for the last one only.
            at = POOLED_POSITION % int(hidden.shape[1])
            pooled = hidden[:, at : at + 1, :]
            pooled = _attention(last.self_attn, last.layer_norm1(hidden), at) + pooled
            pooled = last.mlp(last.layer_norm2(pooled)) + pooled
            out: torch.Tensor = self.head(self.final_layer_norm(pooled[:, 0, :]))
            return out

    return FusibleTextTower(tower).eval()


def _attention(attn: Any, states: Any, only: int | None) -> Any:
    """Multi-head attention without a mask; queries only at position ``only`` if given.

    Written as BERT's ``softmax(q @ k^T / sqrt(d)) @ v`` (the pattern the fusion matches);
    transformers multiplies by ``d ** -0.5`` instead, the same number when ``d`` is a power
    of 4 (base, large: 64) and within one rounding otherwise.
    """
    import torch

    batch, length, width = states.shape
    heads = attn.num_heads
    size = width // heads
    query_states = states if only is None else states[:, only : only + 1, :]
    queries = attn.q_proj(query_states).view(batch, -1, heads, size).transpose(1, 2)
    keys = attn.k_proj(states).view(batch, length, heads, size).transpose(1, 2)
    values = attn.v_proj(states).view(batch, length, heads, size).transpose(1, 2)
    scores = torch.matmul(queries, keys.transpose(-1, -2)) / math.sqrt(size)
    weights = torch.softmax(scores, dim=-1)
    context = torch.matmul(weights, values).transpose(1, 2)
    return attn.out_proj(context.reshape(batch, -1, width))


def tower_shape(tower: Any) -> tuple[int, int, int]:
    """(layers, heads, hidden size) of a transformers text transformer."""
    layers = _transformer(tower).encoder.layers
    attn = layers[0].self_attn
    return len(layers), int(attn.num_heads), int(attn.embed_dim)


def _transformer(tower: Any) -> Any:
    """The module holding embeddings/encoder/head (transformers 4 nests it one deeper)."""
    return tower if hasattr(tower, "encoder") else tower.text_model
