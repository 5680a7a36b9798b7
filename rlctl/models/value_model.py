"""A scalar value model (critic): a causal-LM trunk plus a linear value head."""

from __future__ import annotations

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
    ) -> torch.Tensor:
        hidden = self.trunk(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state  # [B, L, H]
        # sum over the size-1 head dim (not squeeze): FSDP2 warns when a root output is a view.
        return self.value_head(hidden).float().sum(-1)  # [B, L]
