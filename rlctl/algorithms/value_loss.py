"""The critic's clipped value loss (PPO), for estimators that use a value model (``gae``)."""

from __future__ import annotations

import torch

from rlctl.algorithms.aggregation import agg_loss
from rlctl.algorithms.masked import masked_mean


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
    *,
    global_normalizer: float | torch.Tensor | None = None,
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``0.5 * agg(max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2))``, all [B, T].

    ``vpreds`` are the critic's current predictions, ``values`` the ones recorded when the
    advantages were computed. Metric ``vf_clipfrac``: share of tokens where the clipped
    term is the larger.
    """
    clipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    losses1 = (vpreds - returns) ** 2
    losses2 = (clipped - returns) ** 2
    loss = 0.5 * agg_loss(
        torch.maximum(losses1, losses2), response_mask, loss_agg_mode,
        global_normalizer=global_normalizer, horizon=horizon,
    )
    clipfrac = masked_mean(torch.gt(losses2, losses1).float(), response_mask)
    return loss, {"vf_clipfrac": float(clipfrac)}
