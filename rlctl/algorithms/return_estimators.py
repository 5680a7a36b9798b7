"""Return-based advantage estimators: GAE (critic), REINFORCE++ (discounted returns), ReMax.

Same calling convention as :mod:`rlctl.algorithms.estimators`. ``response_mask`` may have
holes (multi-turn: observation tokens inside the response); those positions neither get
an advantage nor break the recursion: values and running returns are carried across them.
"""

from __future__ import annotations

from typing import Any

import torch

from rlctl.algorithms.masked import masked_whiten


def _check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    distinct = set(shapes.values())
    if len(distinct) != 1 or len(distinct.pop()) != 2:
        raise ValueError(f"expected [B, T] tensors of one shape, got {shapes}")


def returns_to_go(token_level_rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Undiscounted return-to-go ``G_t = sum_{s >= t} m_s r_s`` [B, T]; masked tokens add
    nothing."""
    return (token_level_rewards * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])


@torch.no_grad()
def compute_gae_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    values: torch.Tensor | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE (1506.02438): ``delta_t = r_t + gamma V_{t+1} - V_t``, ``A_t = delta_t + gamma lam
    A_{t+1}``.

    ``returns = A + V`` (before whitening); the advantages are then whitened over the
    batch's response tokens (Bessel-corrected), as verl does, and zeroed outside the mask.
    """
    if values is None:
        raise ValueError(
            "gae needs `values` from a critic: enable [critic] or pick another estimator"
        )
    _check_same_shape(
        token_level_rewards=token_level_rewards, response_mask=response_mask, values=values
    )
    mask = response_mask.to(values.dtype)
    next_values = torch.zeros_like(values[:, 0])
    last_gae = torch.zeros_like(values[:, 0])
    reversed_adv = []
    for t in reversed(range(token_level_rewards.shape[-1])):
        delta = token_level_rewards[:, t] + gamma * next_values - values[:, t]
        gae_t = delta + gamma * lam * last_gae
        # Masked (observation) tokens: keep the value and the running GAE of the next real token.
        next_values = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_values
        last_gae = gae_t * mask[:, t] + (1 - mask[:, t]) * last_gae
        reversed_adv.append(last_gae)
    advantages = torch.stack(reversed_adv[::-1], dim=1)
    returns = advantages + values
    # verl leaves whitened values on masked positions; they never reach a loss, zero them.
    advantages = masked_whiten(advantages, response_mask) * mask
    return advantages, returns


@torch.no_grad()
def compute_reinforce_plus_plus_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ (2501.03262): discounted return-to-go ``G_t``, whitened over the batch."""
    _check_same_shape(token_level_rewards=token_level_rewards, response_mask=response_mask)
    mask = response_mask.to(token_level_rewards.dtype)
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    for t in reversed(range(token_level_rewards.shape[-1])):
        candidate = token_level_rewards[:, t] + gamma * running
        returns[:, t] = candidate * mask[:, t]
        # Observation tokens carry the running return through unchanged.
        running = candidate * mask[:, t] + running * (1 - mask[:, t])
    advantages = masked_whiten(returns, response_mask) * mask
    return advantages, returns


@torch.no_grad()
def compute_remax_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    reward_baselines: torch.Tensor | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax (2310.10505): ``A_t = G_t - r(greedy)``, with ``G_t`` the undiscounted return-to-go.

    ``reward_baselines`` [B] is the reward of the greedy response to the same prompt.
    """
    if reward_baselines is None:
        raise ValueError(
            "remax needs `reward_baselines` (the reward of a greedy rollout per prompt); the "
            "trainer must run the greedy baseline rollout for this estimator"
        )
    _check_same_shape(token_level_rewards=token_level_rewards, response_mask=response_mask)
    mask = response_mask.to(token_level_rewards.dtype)
    baseline = reward_baselines.reshape(-1).to(token_level_rewards.dtype)
    if baseline.shape[0] != token_level_rewards.shape[0]:
        raise ValueError(
            f"reward_baselines must hold one value per sample ({token_level_rewards.shape[0]}), "
            f"got shape {tuple(reward_baselines.shape)}"
        )
    returns = returns_to_go(token_level_rewards, mask)
    # verl leaves the running return on observation tokens inside a response; zero it there.
    advantages = (returns - baseline.unsqueeze(-1)) * mask
    return advantages, returns
