"""A scalar value model (critic): a causal-LM trunk plus a linear value head."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class ValueModel(nn.Module):
    """``values [B, L]`` for ``input_ids [B, L]``: one scalar per position."""

    def __init__(self, trunk: nn.Module, hidden_size: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.trunk = trunk
        self.value_head = nn.Linear(hidden_size, 1, bias=True, dtype=dtype)
        # Zero init: the first values are 0, so the first critic loss is the plain return MSE.
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @property
    def layers(self) -> nn.ModuleList:
        """Decoder layers (FSDP shards each one)."""
        return self.trunk.layers

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        **attention: Any,
    ) -> torch.Tensor:
        """``attention``: keywords for the attention function (packed rows' ``cu_seq_lens_q``)."""
        # No KV cache: a training forward needs none, and with one transformers would not
        # read packed position ids as separate sequences (rlctl.engines.train.packing).
        hidden = self.trunk(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            use_cache=False, **attention,
        ).last_hidden_state  # [B, L, H]
        # sum over the size-1 head dim (not squeeze): FSDP2 warns when a root output is a view.
        return self.value_head(hidden).float().sum(-1)  # [B, L]
