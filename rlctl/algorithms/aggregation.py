"""Reduce a per-token loss matrix [B, T] to one scalar, micro-batch and data-parallel safe.

Modes (verl's names):

* ``token-mean``: ``sum_{i,t} m L / N_tokens``; every token weighs the same.
* ``seq-mean-token-sum``: ``sum_i (sum_t m L) / N_seqs``.
* ``seq-mean-token-mean``: ``sum_i (sum_t m L / sum_t m) / N_seqs``.
* ``seq-mean-token-sum-norm``: ``sum_i (sum_t m L) / (N_seqs * horizon)`` (Dr. GRPO), with
  ``horizon`` a constant: pass the maximum response length (``rollout.max_new_tokens``);
  when omitted it is ``T`` of this batch (verl's default), which varies between
  micro-batches padded to different lengths.

Sequences whose mask is all zero are not counted in ``N_seqs``.

**Global normaliser.** Without ``global_normalizer`` the denominators are local to the
tensors given (the local mean). With it, the result is ``(local sum) / global_normalizer``
where the normaliser is the *total* over the whole minibatch, across micro-batches and
data-parallel ranks: the token count for ``token-mean``, the non-empty sequence count for
the ``seq-mean-*`` modes (:func:`loss_normalizer` computes the local share; sum it over
micro-batches and all-reduce it over ranks). Then the micro-batch losses add up exactly
to the full-minibatch loss. Data-parallel backends that *average* gradients over ranks
(DDP, FSDP) need the per-rank loss multiplied by the world size to get that sum.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

from rlctl.algorithms.masked import masked_sum

LossAggMode = Literal[
    "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
]
LOSS_AGG_MODES: tuple[str, ...] = get_args(LossAggMode)


def _check_mode(mode: str) -> None:
    if mode not in LOSS_AGG_MODES:
        raise ValueError(
            f"unknown loss aggregation mode {mode!r}; choose one of {', '.join(LOSS_AGG_MODES)}"
        )


def loss_normalizer(loss_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """This batch's share of the global normaliser of ``mode`` (a scalar tensor to sum up).

    Token count for ``token-mean``; count of sequences with at least one token otherwise.
    """
    _check_mode(mode)
    if mode == "token-mean":
        return loss_mask.sum().to(torch.float32)
    return (loss_mask.sum(dim=-1) > 0).sum().to(torch.float32)


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    mode: str,
    *,
    global_normalizer: float | torch.Tensor | None = None,
    horizon: float | None = None,
) -> torch.Tensor:
    """Aggregate ``loss_mat`` [B, T] under ``loss_mask`` [B, T] into a scalar (see module doc)."""
    _check_mode(mode)
    if loss_mat.shape != loss_mask.shape:
        raise ValueError(
            f"loss_mat {tuple(loss_mat.shape)} and loss_mask {tuple(loss_mask.shape)} must have "
            "one shape"
        )
    if loss_mat.dtype in (torch.float16, torch.bfloat16):
        # Token counts in the thousands are not representable in 16-bit floats: reduce in fp32.
        loss_mat = loss_mat.float()
    mask = loss_mask.to(loss_mat.dtype)
    if global_normalizer is None:
        normalizer = loss_normalizer(loss_mask, mode).to(loss_mat.dtype)
    else:
        normalizer = torch.as_tensor(
            global_normalizer, dtype=loss_mat.dtype, device=loss_mat.device
        )
    # An empty batch (normalizer 0) contributes 0, not NaN: its sum is 0 too.
    normalizer = normalizer.clamp(min=1e-8)
    if mode == "token-mean":
        return masked_sum(loss_mat, mask) / normalizer
    token_sums = masked_sum(loss_mat, mask, dim=-1)  # [B]
    if mode == "seq-mean-token-mean":
        per_seq = token_sums / mask.sum(dim=-1).clamp(min=1)
        return per_seq.sum() / normalizer
    loss = token_sums.sum() / normalizer
    if mode == "seq-mean-token-sum-norm":
        loss = loss / (loss_mat.shape[-1] if horizon is None else horizon)
    return loss
