"""The ``median_baseline`` advantage estimator (imports torch: loaded only when selected)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch


def median_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    *,
    epsilon: float = 1e-6,
    scale: str = "none",
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantage of each response = its score minus the median score of its group.

    ``token_level_rewards`` and ``response_mask`` are [B, T]; ``index`` holds B group ids.
    The score of a response is the sum of its token rewards ([B]). With ``scale = "mad"``
    the difference is divided by the group's median absolute deviation (+ epsilon). The
    per-response advantage is broadcast over its response tokens; returns equal advantages.
    """
    scores = token_level_rewards.sum(dim=-1)  # [B]
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, gid in enumerate(list(index)):
        groups[gid].append(i)
    adv = torch.zeros_like(scores)  # [B]
    for members in groups.values():
        ids = torch.tensor(members)
        group = scores[ids]
        # torch.median returns the lower middle value for even sizes; use the true median
        centre = group.quantile(0.5)
        diff = group - centre
        if scale == "mad":
            diff = diff / ((group - centre).abs().quantile(0.5) + epsilon)
        adv[ids] = diff
    advantages = adv.unsqueeze(-1) * response_mask  # [B, T]
    return advantages, advantages
