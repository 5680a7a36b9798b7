"""Group-relative outcome advantage estimators (GRPO family, RLOO, OPO, GPG, REINFORCE++-baseline).

Calling convention (verl's keyword names, shared by every estimator)::

    fn(token_level_rewards=[B, T], response_mask=[B, T], index=<group id per sample, len B>,
       gamma=..., lam=..., norm_adv_by_std_in_grpo=..., epsilon=1e-6, ..., **options)
    -> (advantages [B, T], returns [B, T])

Every function accepts and ignores keywords it does not use, so the trainer can pass the
common set to all of them. Outcome estimators reduce the token rewards to one score per
sample (``sum over T``) and broadcast the advantage over the response tokens; for them
``returns`` is the advantage itself (as in verl).

Group of one: no baseline (mean 0, std 1), so its advantage is its own scaled score,
exactly as verl; ``grpo_passk`` gives it 0 (there is no second-best to beat).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rlctl.algorithms.groups import Groups, as_groups, group_mean_std, group_sum
from rlctl.algorithms.masked import masked_whiten


def _scores(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """One scalar score per sample: [B, T] -> [B]."""
    if token_level_rewards.shape != response_mask.shape or token_level_rewards.dim() != 2:
        raise ValueError(
            "token_level_rewards and response_mask must both be [B, T]; got "
            f"{tuple(token_level_rewards.shape)} and {tuple(response_mask.shape)}"
        )
    return token_level_rewards.sum(dim=-1)


def _scores_and_groups(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any
) -> tuple[torch.Tensor, Groups]:
    """Per-sample scores [B] and the groups they fall in."""
    scores = _scores(token_level_rewards, response_mask)
    return scores, as_groups(index, scores.shape[0], scores.device)


def _broadcast(per_sample: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[B] -> [B, T], zero outside the response."""
    return per_sample.unsqueeze(-1) * response_mask.to(per_sample.dtype)


def _outcome(
    per_sample: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)`` of an outcome estimator: both the broadcast advantage [B, T]."""
    adv = _broadcast(per_sample, response_mask)
    return adv, adv


@torch.no_grad()
def compute_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: ``A_i = (r_i - mean_g) / (std_g + eps)``, std unbiased (DeepSeekMath, 2402.03300).

    With ``norm_adv_by_std_in_grpo=False`` the division is skipped (Dr. GRPO's advantage).
    """
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    mean, std = group_mean_std(scores, groups)
    adv = (scores - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores - mean
    return _outcome(adv, response_mask)


@torch.no_grad()
def compute_dr_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dr. GRPO (2503.20783): ``A_i = r_i - mean_g``, never divided by the std.

    The length bias is removed by the loss aggregation: pair it with
    ``agg = "seq-mean-token-sum-norm"`` (the registration recommends it).
    """
    return compute_grpo_advantage(
        token_level_rewards, response_mask, index, norm_adv_by_std_in_grpo=False
    )


@torch.no_grad()
def compute_grpo_passk_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pass@k GRPO: only each group's best sample is credited, with ``r_max - r_second``.

    Divided by the group's unbiased std (+eps) when ``norm_adv_by_std_in_grpo``. Ties for
    the best go to the first one in batch order. A group of one gets 0 (verl raises).
    """
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    adv = torch.zeros_like(scores)
    for members in groups.members():
        if members.numel() < 2:
            continue
        rewards = scores[members]
        top, top_idx = torch.topk(rewards, 2)
        value = top[0] - top[1]
        if norm_adv_by_std_in_grpo:
            value = value / (torch.std(rewards) + epsilon)
        adv[members[top_idx[0]]] = value
    return _outcome(adv, response_mask)


@torch.no_grad()
def compute_gdpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    reward_components: Mapping[str, torch.Tensor] | None = None,
    reward_keys: Sequence[str] = (),
    reward_weights: Sequence[float] | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GDPO (2601.05242): GRPO-normalise each reward component in its group, weight-sum, whiten.

    ``reward_components`` maps a component name to its rewards, [B, T] (token level) or
    [B] (one score per sample). With no ``reward_keys`` the summed ``token_level_rewards``
    is the only component (then GDPO = whitened GRPO).
    """
    if reward_keys:
        if reward_components is None:
            raise ValueError(
                "gdpo needs `reward_components` (per-component rewards) for reward_keys "
                f"{list(reward_keys)}; the reward functions must return a dict with those keys"
            )
        missing = [k for k in reward_keys if k not in reward_components]
        if missing:
            raise ValueError(
                f"gdpo reward keys {missing} are not among the reward components "
                f"{sorted(reward_components)}; fix [algorithm.estimator_options] reward_keys"
            )
        components = [reward_components[k] for k in reward_keys]
    else:
        components = [token_level_rewards]
    if reward_weights is not None and len(reward_weights) != len(components):
        raise ValueError(
            f"gdpo has {len(components)} reward components but {len(reward_weights)} "
            "reward_weights; give one weight per key"
        )
    weights = list(reward_weights) if reward_weights is not None else [1.0] * len(components)
    total = torch.zeros_like(token_level_rewards)
    for weight, component in zip(weights, components, strict=True):
        comp = component.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)
        if comp.dim() == 1:  # one score per sample: the sum over T is the score itself
            comp = torch.nn.functional.pad(
                comp.unsqueeze(-1), (0, token_level_rewards.shape[-1] - 1)
            )
        normalised, _ = compute_grpo_advantage(
            comp,
            response_mask,
            index,
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        )
        total = total + weight * normalised
    adv = masked_whiten(total, response_mask) * response_mask
    return adv, adv


@torch.no_grad()
def compute_rloo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO (2402.14740): ``A_i = r_i - mean_{j != i} r_j = n/(n-1) (r_i - mean_g)``.

    The baseline excludes the sample itself. A group of one keeps its raw score (verl).
    """
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    n = groups.sizes.to(scores.dtype)[groups.ids]
    mean = group_sum(scores, groups)[groups.ids] / n
    leave_one_out = (scores - mean) * n / (n - 1).clamp(min=1)
    adv = torch.where(n > 1, leave_one_out, scores)
    return _outcome(adv, response_mask)


@torch.no_grad()
def compute_opo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """OPO (2505.23585): baseline = length-weighted group mean ``sum(l_j r_j) / sum(l_j)``."""
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    lengths = response_mask.sum(dim=-1).to(scores.dtype)
    # An all-empty group has sum(l) = 0 and sum(l r) = 0: clamp keeps the baseline 0, not NaN.
    baseline = group_sum(lengths * scores, groups) / group_sum(lengths, groups).clamp(min=1e-12)
    baseline = torch.where(groups.sizes > 1, baseline, torch.zeros_like(baseline))
    return _outcome(scores - baseline[groups.ids], response_mask)


@torch.no_grad()
def compute_gpg_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    f_norm: float = 1.0,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPG (2504.02546): ``A_i = alpha (r_i - mean_g) / f_norm``, ``alpha = B / #{r != 0}``.

    ``alpha`` counts non-zero scores in the batch this call sees (B / max(count, 1)).
    """
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    alpha = scores.shape[0] / torch.count_nonzero(scores).clamp(min=1).to(scores.dtype)
    mean, _std = group_mean_std(scores, groups)
    return _outcome(alpha * (scores - mean) / f_norm, response_mask)


@torch.no_grad()
def compute_reinforce_plus_plus_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++-baseline (2501.03262): subtract the group mean, then whiten over the batch."""
    scores, groups = _scores_and_groups(token_level_rewards, response_mask, index)
    mean, _std = group_mean_std(scores, groups)
    adv = _broadcast(scores - mean, response_mask)
    adv = masked_whiten(adv, response_mask) * response_mask
    return adv, adv
