"""Optimal token baseline (OTB): a per-timestep, variance-weighted group baseline.

For each group and timestep t: ``B_t = sum_i G_{i,t} W_{i,t} / (sum_i W_{i,t} + eps)`` with
``G`` the return-to-go and ``W_t = sum_{j<=t} (1 - 2 pi_j + sum_v pi_v^2)`` the cumulative
path-variance proxy (``pi_j = exp(old_log_prob_j)``; ``sum_pi_squared`` comes from the
training engine's forward). ``A_t = G_t - B_t``. Same calling convention as
:mod:`rlctl.algorithms.estimators`.

``optimal_token_baseline`` aligns trajectories by absolute position; the multi-turn
``tir_optimal_token_baseline`` aligns them by the index of their *valid* tokens (tool /
observation tokens inside a response are skipped), then scatters back.

These use their own ``baseline_epsilon`` (verl: 1e-8), not the trainer's common ``epsilon``.
A group of one has no baseline (``A = G``).
"""

from __future__ import annotations

from typing import Any

import torch

from rlctl.algorithms.groups import as_groups
from rlctl.algorithms.return_estimators import returns_to_go


def _path_weights(
    old_log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is_weights: torch.Tensor | None,
) -> torch.Tensor:
    """Cumulative path-variance proxy W [B, T]."""
    w = 1 - 2 * torch.exp(old_log_probs) + sum_pi_squared
    if rollout_is_weights is not None:
        # Under truncated IS the MSE-optimal weight is scaled by rho^2.
        w = w * rollout_is_weights**2
    return (w * response_mask).cumsum(dim=-1)


def _returns_and_path_weights(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor | None,
    sum_pi_squared: torch.Tensor | None,
    rollout_is_weights: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What both variants start from: the float mask, returns-to-go G and weights W, all [B, T]."""
    if old_log_probs is None or sum_pi_squared is None:
        raise ValueError(
            f"{name} needs `old_log_probs` and `sum_pi_squared` ([B, T], sum over the vocabulary "
            "of pi^2) from the training engine's forward pass"
        )
    mask = response_mask.to(token_level_rewards.dtype)
    returns = returns_to_go(token_level_rewards, mask)
    return mask, returns, _path_weights(old_log_probs, sum_pi_squared, mask, rollout_is_weights)


def _zero_longest_tail(baselines: torch.Tensor, rows: torch.Tensor, lengths: torch.Tensor) -> None:
    """Zero the baseline where the group's unique longest trajectory runs past the second longest.

    There a single trajectory is left, so the baseline would be its own return.
    """
    sorted_lengths, _ = torch.sort(lengths)
    longest, second = int(sorted_lengths[-1]), int(sorted_lengths[-2])
    at_max = (lengths == longest).nonzero(as_tuple=True)[0]
    if at_max.numel() == 1 and longest > second:
        baselines[rows[at_max[0]], second:] = 0.0


@torch.no_grad()
def compute_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    baseline_epsilon: float = 1e-8,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """OTB with trajectories aligned by absolute position; returns (advantages, returns)."""
    mask, returns, w_cum = _returns_and_path_weights(
        "optimal_token_baseline",
        token_level_rewards,
        response_mask,
        old_log_probs,
        sum_pi_squared,
        rollout_is_weights,
    )
    groups = as_groups(index, returns.shape[0], returns.device)
    baselines = torch.zeros_like(returns)
    for rows in groups.members():
        if rows.numel() == 1:
            continue
        g_mask = mask[rows]
        num = (returns[rows] * w_cum[rows] * g_mask).sum(dim=0)
        den = (w_cum[rows] * g_mask).sum(dim=0) + baseline_epsilon
        baselines[rows] = (num / den).to(baselines.dtype).unsqueeze(0).expand(rows.numel(), -1)
        if handle_zero_tail:
            _zero_longest_tail(baselines, rows, g_mask.sum(dim=-1))
    return (returns - baselines) * mask, returns


@torch.no_grad()
def compute_tir_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    baseline_epsilon: float = 1e-8,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-turn OTB: baseline over valid-token positions; returns (advantages, returns)."""
    mask, returns, w_cum = _returns_and_path_weights(
        "tir_optimal_token_baseline",
        token_level_rewards,
        response_mask,
        old_log_probs,
        sum_pi_squared,
        rollout_is_weights,
    )
    valid = response_mask.bool()
    lengths = valid.sum(dim=-1)
    width = int(lengths.max()) if lengths.numel() else 0
    # Compact every row to its valid tokens: [B, L] with L = longest valid length.
    packed_w = w_cum.new_zeros((returns.shape[0], width))
    packed_g = returns.new_zeros((returns.shape[0], width))
    for i in range(returns.shape[0]):
        n = int(lengths[i])
        packed_w[i, :n] = w_cum[i, valid[i]]
        packed_g[i, :n] = returns[i, valid[i]]
    groups = as_groups(index, returns.shape[0], returns.device)
    baselines = torch.zeros_like(packed_g)
    for rows in groups.members():
        rows = rows[lengths[rows] > 0]  # empty responses take no part in the baseline
        if rows.numel() <= 1:
            continue
        num = (packed_g[rows] * packed_w[rows]).sum(dim=0)
        den = packed_w[rows].sum(dim=0) + baseline_epsilon
        baselines[rows] = (num / den).to(baselines.dtype)
        if handle_zero_tail:
            _zero_longest_tail(baselines, rows, lengths[rows])
    packed_adv = packed_g - baselines
    advantages = torch.zeros_like(returns)
    for i in range(returns.shape[0]):
        n = int(lengths[i])
        if n:
            advantages[i, valid[i]] = packed_adv[i, :n]
    return advantages * mask, returns
