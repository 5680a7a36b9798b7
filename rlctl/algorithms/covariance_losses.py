"""Covariance-based entropy-preserving losses: Clip-Cov and KL-Cov (2505.22617).

Both pick a small share of tokens whose ``cov = (A - mean A)(log pi - mean log pi)`` is
large (those drive entropy collapse) and treat them specially: Clip-Cov drops their
gradient, KL-Cov adds ``ppo_kl_coef * |log r|`` to their loss. Same calling convention as
:mod:`rlctl.algorithms.policy_losses`.
"""

from __future__ import annotations

from typing import Any

import torch

from rlctl.algorithms.masked import masked_mean
from rlctl.algorithms.policy_loss_inputs import policy_loss
from rlctl.algorithms.policy_losses import log_ratio_and_kl, loss_metrics, ppo_clip


@policy_loss(default_agg_mode="token-mean")
def compute_policy_loss_clip_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_cov_ratio: float = 0.0002,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    generator: torch.Generator | None = None,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Clip-Cov: PPO clip, plus zero gradient on ``max(1, clip_cov_ratio * N)`` random tokens
    with ``clip_cov_lb < cov < clip_cov_ub`` among those PPO did not clip.

    ``pg_clipfrac`` is the share of tokens so dropped (verl's definition). The random pick
    uses ``generator`` (default: torch's global RNG, seeded by the trainer).
    """
    if clip_cov_ratio <= 0:
        raise ValueError(f"clip_cov_ratio must be > 0, got {clip_cov_ratio}")
    log_ratio, ppo_kl = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    clipped, clip_won = ppo_clip(torch.exp(log_ratio), advantages, clip_low, clip_high)
    valid = response_mask > 0
    with torch.no_grad():
        clipped_by_ppo = clip_won & valid
        cov = (advantages - masked_mean(advantages, response_mask)) * (
            log_prob - masked_mean(log_prob, response_mask)
        )
        candidates = (cov > clip_cov_lb) & (cov < clip_cov_ub) & valid & ~clipped_by_ppo
        candidate_idx = torch.nonzero(candidates)  # [K, 2]
        budget = max(int(clip_cov_ratio * float(response_mask.sum())), 1)
        if candidate_idx.shape[0] > budget:
            pick = torch.randperm(candidate_idx.shape[0], generator=generator)[:budget]
            candidate_idx = candidate_idx[pick.to(candidate_idx.device)]
        keep = torch.ones_like(advantages)
        keep[candidate_idx[:, 0], candidate_idx[:, 1]] = 0
    return clipped * keep, loss_metrics(ppo_kl, masked_mean((keep == 0).float(), response_mask))


@policy_loss(default_agg_mode="token-mean")
def compute_policy_loss_kl_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    kl_cov_ratio: float = 0.0002,
    ppo_kl_coef: float = 0.1,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """KL-Cov: unclipped ``-A r``; the top ``max(1, kl_cov_ratio * N)`` tokens by covariance
    get ``-A r + ppo_kl_coef |log r|``.

    ``ppo_kl`` is the masked mean of ``|log r|`` here (verl); ``pg_clipfrac`` is the share
    of penalised tokens.
    """
    if kl_cov_ratio <= 0:
        raise ValueError(f"kl_cov_ratio must be > 0, got {kl_cov_ratio}")
    log_ratio, _ = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    ratio = torch.exp(log_ratio)
    abs_kl = log_ratio.abs()
    pg_losses1 = -advantages * ratio
    pg_losses_kl = pg_losses1 + ppo_kl_coef * abs_kl
    valid = response_mask > 0
    with torch.no_grad():
        penalised = torch.zeros_like(valid)
        n_valid = int(valid.sum())
        if n_valid > 0:
            adv_v = advantages[valid]
            logp_v = log_prob[valid]
            cov = (adv_v - adv_v.mean()) * (logp_v - logp_v.mean())  # [n_valid]
            k = max(1, int(n_valid * kl_cov_ratio))
            top = torch.topk(cov, k, largest=True).indices
            flat = torch.nonzero(valid.reshape(-1), as_tuple=True)[0][top]
            penalised.view(-1)[flat] = True
    pg_losses = torch.where(penalised, pg_losses_kl, pg_losses1)
    # ppo_kl is the mean |log r| here, as in verl.
    return pg_losses, loss_metrics(
        masked_mean(abs_kl.detach(), response_mask), masked_mean(penalised.float(), response_mask)
    )
