"""Variable-length attention for packed rows: each sample attends causally to itself only.

transformers offers packing on CPU through the position ids alone: with no attention mask it
builds a block-diagonal causal mask over the whole packed row (``masking_utils.
find_packed_sequence_indices``), and sdpa then computes every query against every key of the
row, ``T^2`` for a row of ``T`` tokens, masked. Flash attention's varlen kernels skip the
masked blocks, but they need CUDA. This attention function does the same on any device: it
runs sdpa once per sample with ``is_causal`` (``sum L_i^2``, no mask), given the samples'
boundaries as ``cu_seq_lens_q`` (the keyword transformers forwards to attention functions,
as for flash attention's varlen path).

It is registered under :data:`NAME` with transformers' ``AttentionInterface`` and no mask
function, so transformers builds no mask at all for a model that uses it; an engine switches
a model to it only when every forward it runs is packed (``[engines.train.options] packing``).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch

NAME = "rlctl_varlen_sdpa"


def varlen_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """query ``[1, H, T, D]``, key / value ``[1, Hkv, T, D]`` -> ``[1, T, H, D]``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is None or query.shape[0] != 1:
        raise RuntimeError(
            f"the {NAME} attention runs packed rows only (one row, cu_seq_lens_q giving the "
            "samples' boundaries); this model was switched to it for packed training forwards"
        )
    edges = bounds.tolist() if isinstance(bounds, torch.Tensor) else list(bounds)
    outputs = []
    for start, end in pairwise(edges):
        out, _ = sdpa_attention_forward(
            module, query[:, :, start:end], key[:, :, start:end], value[:, :, start:end],
            None, dropout=dropout, scaling=scaling, is_causal=True,
        )
        outputs.append(out)  # [1, L_i, H, D]
    return torch.cat(outputs, dim=1), None


def use_varlen_attention(model: torch.nn.Module) -> None:
    """Register :func:`varlen_sdpa` (once per process) and switch ``model`` to it."""
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, varlen_sdpa)
    model.set_attn_implementation(NAME)
