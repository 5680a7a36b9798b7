"""Group bookkeeping for group-relative estimators: which samples share a prompt.

``index`` is the group id of each sample (verl's ``uid``): a numpy array, a list or a
1-D tensor of length B, holding strings or integers. Groups may have unequal sizes
(n adjustable per prompt, failed samples dropped).

A group of one has no peers to compare with. Following verl, its statistics are
mean 0 and std 1, i.e. *no baseline*: its advantage is its own (scaled) reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Groups:
    """Dense group ids of a batch.

    ``ids`` [B] (long, 0..G-1, on the scores' device), ``sizes`` [G], ``count`` = G.
    """

    ids: torch.Tensor
    sizes: torch.Tensor
    count: int

    def members(self) -> list[torch.Tensor]:
        """Sample indices of each group, in batch order: G tensors of indices."""
        order = torch.argsort(self.ids, stable=True)
        return list(torch.split(order, self.sizes.tolist()))


def as_groups(
    index: Sequence[Any] | np.ndarray | torch.Tensor, batch_size: int, device: torch.device
) -> Groups:
    """Turn per-sample group ids into dense ids; fails loudly on a length mismatch."""
    if index is None:
        raise ValueError(
            "this advantage estimator is group-based and needs `index` (the group id of each "
            "sample, length B); the trainer passes the prompt uid of each sample"
        )
    if isinstance(index, torch.Tensor):
        keys = index.detach().cpu().numpy()
    else:
        keys = np.asarray(index)
    if keys.ndim != 1 or keys.shape[0] != batch_size:
        raise ValueError(
            f"`index` must hold one group id per sample: expected shape ({batch_size},), got "
            f"{tuple(keys.shape)}"
        )
    if batch_size == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return Groups(empty, empty, 0)
    _, inverse = np.unique(keys, return_inverse=True)
    ids = torch.as_tensor(inverse.reshape(-1), dtype=torch.long, device=device)
    sizes = torch.bincount(ids)
    return Groups(ids, sizes, int(sizes.numel()))


def group_sum(values: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Per-group sum of per-sample ``values`` [B] -> [G]."""
    out = torch.zeros(groups.count, dtype=values.dtype, device=values.device)
    return out.index_add_(0, groups.ids, values)


def group_mean_std(scores: torch.Tensor, groups: Groups) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample group mean and unbiased std of ``scores`` [B] -> ([B], [B]).

    Groups of one get mean 0 and std 1 (verl), so they keep their raw score.
    """
    sizes = groups.sizes.to(scores.dtype)
    mean_g = group_sum(scores, groups) / sizes
    centred = scores - mean_g[groups.ids]
    # Bessel-corrected variance; singletons would divide by zero, they are replaced below.
    var_g = group_sum(centred * centred, groups) / (sizes - 1).clamp(min=1)
    std_g = var_g.sqrt()
    single = groups.sizes == 1
    mean_g = torch.where(single, torch.zeros_like(mean_g), mean_g)
    std_g = torch.where(single, torch.ones_like(std_g), std_g)
    return mean_g[groups.ids], std_g[groups.ids]
