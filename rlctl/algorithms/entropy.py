"""Per-token statistics of the policy's distribution, computed from logits by the engines.

``entropy_from_logits`` feeds the entropy bonus; ``sum_pi_squared_from_logits`` feeds the
optimal-token-baseline estimators. Both work on [B, T, V] (or any [..., V]) logits and can
chunk over the leading positions to bound the float32 softmax copy.
"""

from __future__ import annotations

import torch

from rlctl.algorithms.aggregation import agg_loss


def _chunked(fn, logits: torch.Tensor, chunk_size: int | None) -> torch.Tensor:
    if chunk_size is None:
        return fn(logits)
    flat = logits.reshape(-1, logits.shape[-1])
    out = (
        torch.cat([fn(part) for part in torch.split(flat, chunk_size)])
        if flat.shape[0]
        else flat.new_zeros(0)
    )
    return out.reshape(logits.shape[:-1])


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    # sum -p log p from the (max-shifted) softmax: verl's logsumexp(z) - sum p z equals it
    # but cancels catastrophically in float32 when logits are large; entr(0) = 0 also keeps
    # -inf logits (masked vocabulary) finite.
    return torch.special.entr(torch.softmax(logits, dim=-1)).sum(dim=-1)


def _sum_pi_squared(logits: torch.Tensor) -> torch.Tensor:
    # sum_v pi_v^2 = exp(logsumexp(2 z) - 2 logsumexp(z)): no softmax copy, no underflow.
    return torch.exp(torch.logsumexp(2 * logits, dim=-1) - 2 * torch.logsumexp(logits, dim=-1))


def entropy_from_logits(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Shannon entropy of ``softmax(logits)`` over the last axis: [B, T, V] -> [B, T]."""
    return _chunked(_entropy, logits, chunk_size)


def sum_pi_squared_from_logits(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """``sum_v pi_v^2`` of ``softmax(logits)``: [B, T, V] -> [B, T] (for the OTB estimators)."""
    return _chunked(_sum_pi_squared, logits, chunk_size)


def entropy_bonus(
    entropy: torch.Tensor,
    response_mask: torch.Tensor,
    coef: float,
    loss_agg_mode: str = "token-mean",
    *,
    global_normalizer: float | torch.Tensor | None = None,
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The entropy term to *add* to the loss: ``-coef * agg(entropy)`` (maximises entropy).

    ``entropy`` [B, T] keeps its gradient. Metric ``entropy``: the aggregated entropy (this
    micro-batch's share when ``global_normalizer`` is given).
    """
    aggregated = agg_loss(
        entropy, response_mask, loss_agg_mode, global_normalizer=global_normalizer, horizon=horizon
    )
    return -coef * aggregated, {"entropy": float(aggregated.detach())}
