"""Policy losses: PPO-clip (vanilla, DAPO clip-higher, dual-clip), GSPO, CISPO, SAPO, GPG, GMPO.

Every loss is called as ``fn(inputs: PolicyLossInputs, **options) -> (loss, metrics)``
(:mod:`rlctl.algorithms.policy_loss_inputs`) and written as its math only,
``(old_log_prob, log_prob, advantages, response_mask, *, clip_low, clip_high, clip_ratio_c,
**own_options) -> (per-token losses [B, T], metrics)``; the
:func:`~rlctl.algorithms.policy_loss_inputs.policy_loss` decorator turns the math into that
call (the off-policy correction, aggregation, floatified metrics). ``options`` are the loss's
own validated options; the math ignores the clip bounds it does not use.

Metrics always hold ``pg_clipfrac``, ``ppo_kl`` (k1 estimate of KL(old || new), masked
mean) and ``pg_clipfrac_lower`` (verl's names), plus the correction's metrics when one is on.
"""

from __future__ import annotations

from typing import Any

import torch

from rlctl.algorithms.masked import masked_mean
from rlctl.algorithms.off_policy import OffPolicyCorrection
from rlctl.algorithms.policy_loss_inputs import apply_correction, policy_loss

# Log-ratios are clamped before exp() so a wild token cannot overflow to inf (verl does the
# same); inside [-20, 20] the numerics are untouched.
LOG_RATIO_CLAMP = 20.0


def _check_shapes(
    old_log_prob: torch.Tensor, log_prob: torch.Tensor, response_mask: torch.Tensor
) -> None:
    if not (old_log_prob.shape == log_prob.shape == response_mask.shape):
        raise ValueError(
            "old_log_prob, log_prob and response_mask must be [B, T] of one shape; got "
            f"{tuple(old_log_prob.shape)}, {tuple(log_prob.shape)}, {tuple(response_mask.shape)}"
        )


def log_ratio_and_kl(
    old_log_prob: torch.Tensor, log_prob: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clamped ``log(pi / pi_old)`` [B, T] and ``ppo_kl`` (masked mean of ``-log_ratio``)."""
    _check_shapes(old_log_prob, log_prob, response_mask)
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-LOG_RATIO_CLAMP, max=LOG_RATIO_CLAMP)
    return log_ratio, masked_mean(-log_ratio.detach(), response_mask)


def _check_clip(clip_low: float, clip_high: float) -> None:
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"clip_low and clip_high must be >= 0, got {clip_low} and {clip_high}")


def ppo_clip(
    ratio: torch.Tensor, advantages: torch.Tensor, clip_low: float, clip_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's pessimistic surrogate ``max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))`` [B, T]
    and where its clipped term is the larger one (bool [B, T], the clip fraction's numerator)."""
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    return torch.maximum(unclipped, clipped), torch.gt(clipped, unclipped)


def loss_metrics(
    ppo_kl: torch.Tensor,
    pg_clipfrac: torch.Tensor | None = None,
    pg_clipfrac_lower: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The metrics every loss reports (module doc); a clip fraction it lacks is reported as 0."""
    return {
        "pg_clipfrac": torch.zeros(()) if pg_clipfrac is None else pg_clipfrac,
        "ppo_kl": ppo_kl,
        "pg_clipfrac_lower": torch.zeros(()) if pg_clipfrac_lower is None else pg_clipfrac_lower,
    }


@policy_loss(default_agg_mode="token-mean")
def compute_policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_ratio_c: float | None = 3.0,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """PPO clip (1707.06347) with asymmetric bounds (DAPO clip-higher) and dual-clip (1912.09729).

    ``L = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))``; for ``A < 0`` additionally
    ``min(L, -A c)`` with ``c = clip_ratio_c`` (``None`` disables dual-clip).
    """
    _check_clip(clip_low, clip_high)
    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c (dual-clip bound) must be > 1, got {clip_ratio_c}")
    log_ratio, ppo_kl = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    clipped, clip_won = ppo_clip(torch.exp(log_ratio), advantages, clip_low, clip_high)
    pg_clipfrac = masked_mean(clip_won.float(), response_mask)
    if clip_ratio_c is None:
        pg_losses = clipped
        pg_clipfrac_lower = None  # no dual clip: reported as 0
    else:
        pg_losses3 = -advantages * clip_ratio_c
        dual = torch.minimum(pg_losses3, clipped)
        pg_clipfrac_lower = masked_mean(
            (torch.gt(clipped, pg_losses3) & (advantages < 0)).float(), response_mask
        )
        pg_losses = torch.where(advantages < 0, dual, clipped)
    return pg_losses, loss_metrics(ppo_kl, pg_clipfrac, pg_clipfrac_lower)


@policy_loss(default_agg_mode="seq-mean-token-mean")
def compute_policy_loss_gspo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """GSPO (2507.18071): PPO clip on the sequence ratio ``s_i = exp(mean_t log r_t)``.

    Per token ``s_{i,t} = sg[s_i] * pi_t / sg[pi_t]`` (value ``s_i``, gradient of
    ``log pi_t``). verl always aggregates with ``seq-mean-token-mean``; pass that mode to
    match (rlctl honours the recipe's mode). ``pg_clipfrac_lower`` is 0.
    """
    _check_clip(clip_low, clip_high)
    _check_shapes(old_log_prob, log_prob, response_mask)
    mask = response_mask.to(log_prob.dtype)
    log_ratio = log_prob - old_log_prob
    lengths = mask.sum(dim=-1).clamp(min=1)
    seq_log_ratio = (log_ratio * mask).sum(dim=-1) / lengths  # [B]
    token_log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    seq_ratio = torch.exp(torch.clamp(token_log_ratio, max=10.0))
    pg_losses, clip_won = ppo_clip(seq_ratio, advantages, clip_low, clip_high)
    ppo_kl = masked_mean(-log_ratio.detach(), response_mask)
    return pg_losses, loss_metrics(ppo_kl, masked_mean(clip_won.float(), response_mask))


@policy_loss(default_agg_mode="token-mean")
def compute_policy_loss_cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """CISPO (MiniMax-M1, 2506.13585): ``L = -sg[clip(r, 1 - clip_low, 1 + clip_high)] A log pi``.

    Every token keeps a gradient (through ``log pi``); only the IS weight is clipped.
    """
    _check_clip(clip_low, clip_high)
    log_ratio, ppo_kl = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    pg_losses = -clipped_ratio.detach() * advantages * log_prob
    return pg_losses, loss_metrics(
        ppo_kl, masked_mean((ratio != clipped_ratio).float(), response_mask)
    )


@policy_loss(default_agg_mode="seq-mean-token-mean")
def compute_policy_loss_sapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """SAPO (2511.20347): a smooth sigmoid gate instead of a hard clip.

    ``L = -A * f(r)``, ``f(r) = sigmoid(tau (r - 1)) * 4 / tau`` with ``tau = tau_pos`` for
    ``A > 0`` else ``tau_neg``. verl aggregates with ``seq-mean-token-mean``. Clip
    fractions are 0 (nothing is clipped).
    """
    log_ratio, ppo_kl = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    ratio = torch.exp(log_ratio)
    pos = torch.as_tensor(tau_pos, dtype=advantages.dtype, device=advantages.device)
    neg = torch.as_tensor(tau_neg, dtype=advantages.dtype, device=advantages.device)
    taus = torch.where(advantages > 0, pos, neg)
    gates = torch.sigmoid(taus * (ratio - 1.0)) * (4.0 / taus)
    pg_losses = -gates * advantages
    return pg_losses, loss_metrics(ppo_kl)


@policy_loss(default_agg_mode="token-mean")
def compute_policy_loss_gpg(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """GPG (2504.02546): plain policy gradient ``L = -A log pi``, no ratio and no clip."""
    _, ppo_kl = log_ratio_and_kl(old_log_prob, log_prob, response_mask)
    pg_losses = -log_prob * advantages
    return pg_losses, loss_metrics(ppo_kl)


@policy_loss(default_agg_mode="seq-mean-token-mean", applies_tis=True)
def compute_policy_loss_geo_mean(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    rollout_log_probs: torch.Tensor | None = None,
    correction: OffPolicyCorrection | None = None,
    **_: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """GMPO (2507.20673): maximise the geometric mean of token ratios, clipped per token.

    Per sequence ``L_i = -Abar_i exp(mean_t sgn(A) min(sgn(A) l_t, sgn(A) clip(l_t, -clip_low,
    clip_high)))`` with ``l_t = log r_t`` and ``Abar_i`` the mean token advantage. ``L_i`` is
    put on every token of sequence i, so ``seq-mean-token-mean`` gives verl's mean over
    sequences (empty sequences excluded); other modes weight sequences by length. An
    off-policy correction's token weights enter as their per-sequence geometric mean (so
    one masked token masks its whole sequence). The paper recommends a wider clip (0.4)
    than PPO.
    """
    _check_clip(clip_low, clip_high)
    _check_shapes(old_log_prob, log_prob, response_mask)
    mask = response_mask.to(log_prob.dtype)
    log_ratio = log_prob - old_log_prob
    sign = torch.sign(advantages)
    clamped = torch.clamp(log_ratio, -clip_low, clip_high)
    token_term = sign * torch.minimum(sign * log_ratio, sign * clamped)
    lengths = mask.sum(dim=-1)
    seq_ratio = torch.exp((token_term * mask).sum(dim=-1) / (lengths + 1e-8))  # [B]
    seq_adv = (advantages * mask).sum(dim=-1) / (lengths + 1e-8)  # [B]
    seq_losses = -seq_adv * seq_ratio
    metrics: dict[str, Any] = {}
    if correction is not None:
        token_w = apply_correction(torch.ones_like(log_prob), old_log_prob, rollout_log_probs,
                                   response_mask, correction, metrics)
        seq_losses = seq_losses * torch.exp(
            (torch.log(token_w + 1e-10) * mask).sum(dim=-1) / (lengths + 1e-8)
        )
    pg_losses = seq_losses.unsqueeze(-1).expand_as(log_prob)
    was_clipped = torch.ne(log_ratio, clamped)
    metrics.update(
        loss_metrics(
            masked_mean(-log_ratio.detach(), response_mask),
            pg_clipfrac=masked_mean((was_clipped & (advantages > 0)).float(), response_mask),
            pg_clipfrac_lower=masked_mean((was_clipped & (advantages < 0)).float(), response_mask),
        )
    )
    return pg_losses, metrics
