"""Truncated importance sampling (TIS) between the rollout engine and the trainer.

The rollout engine (vLLM, SGLang, bf16 kernels...) samples from a slightly different
distribution than the training engine computes. TIS reweights each token's policy loss by
``w_t = min(exp(old_log_prob_t - rollout_log_prob_t), cap)``, a constant (no gradient),
as in verl's ``tis_imp_ratio_cap`` (Yao et al., "Your efficient RL framework secretly
brings you off-policy RL training", 2025).
"""

from __future__ import annotations

import torch

from rlctl.algorithms.masked import masked_mean


def truncated_is_weights(
    old_log_prob: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    cap: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token TIS weights [B, T] (detached, 0 outside the mask) and their metrics.

    Metrics: ``tis_weight_mean`` (after truncation), ``tis_clipfrac`` (share of tokens
    truncated) and ``rollout_kl`` (k1 estimate of KL(rollout || trainer), masked mean).
    """
    if cap <= 0:
        raise ValueError(f"tis_cap must be positive, got {cap}")
    if rollout_log_probs.shape != old_log_prob.shape:
        raise ValueError(
            f"rollout_log_probs {tuple(rollout_log_probs.shape)} must match old_log_prob "
            f"{tuple(old_log_prob.shape)}"
        )
    with torch.no_grad():
        log_ratio = (old_log_prob - rollout_log_probs).clamp(min=-20.0, max=20.0)
        raw = torch.exp(log_ratio)
        weights = raw.clamp(max=cap)
        # Zero outside the response so a garbage ratio on padding can never reach a gradient.
        weights = torch.where(response_mask.bool(), weights, torch.zeros_like(weights))
        metrics = {
            "tis_weight_mean": float(masked_mean(weights, response_mask)),
            "tis_clipfrac": float(masked_mean((raw > cap).to(raw.dtype), response_mask)),
            "rollout_kl": float(masked_mean(rollout_log_probs - old_log_prob, response_mask)),
        }
    return weights, metrics
