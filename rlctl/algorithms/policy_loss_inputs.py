"""How a policy loss is called: one typed :class:`PolicyLossInputs` plus the loss's own options.

Every registered policy loss (``[algorithm.loss] policy_loss = NAME``) is
``fn(inputs: PolicyLossInputs, **options) -> (loss: scalar tensor, metrics: dict[str, float])``
where ``options`` are the fields of the loss's validated ``[algorithm.loss.options]``. The
trainer builds one :class:`PolicyLossInputs` per micro-batch; a loss reads what it uses.

:func:`policy_loss` turns a loss written as its math only into that call: the math gets
``(old_log_prob, log_prob, advantages, response_mask, *, clip_low, clip_high, clip_ratio_c,
**own_options)`` and returns per-token losses ``[B, T]`` and tensor metrics; the decorator
applies the off-policy correction, aggregates with ``loss_agg_mode`` (micro-batch and
data-parallel exact, :func:`rlctl.algorithms.aggregation.agg_loss`) and floatifies the metrics.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlctl.algorithms.aggregation import agg_loss
from rlctl.algorithms.off_policy import OffPolicyCorrection


@dataclass(frozen=True)
class PolicyLossInputs:
    """What the trainer hands a policy loss for one micro-batch (tensors ``[B, T]``)."""

    old_log_prob: torch.Tensor
    """Log-probs of the weights that train this step (``pi_prox``), no gradient."""
    log_prob: torch.Tensor
    """Log-probs of the weights being optimised, with gradient."""
    advantages: torch.Tensor
    """Per-token advantages."""
    response_mask: torch.Tensor
    """1 on generated response tokens, 0 on padding and observations."""
    loss_agg_mode: str | None = None
    """How per-token losses reduce (``[algorithm.loss] agg``); ``None``: the loss's default."""
    clip_low: float = 0.2
    """Lower clip of the ratio (``1 - clip_low``)."""
    clip_high: float = 0.2
    """Upper clip of the ratio (``1 + clip_high``)."""
    clip_ratio_c: float | None = 3.0
    """Dual-clip bound for negative advantages; ``None``: off."""
    rollout_log_probs: torch.Tensor | None = None
    """The rollout engine's log-probs (``pi_behav``); needed when ``correction`` is on."""
    correction: OffPolicyCorrection | None = None
    """The recipe's off-policy correction, resolved; ``None`` (or ``method = "none"``): off."""
    global_normalizer: float | torch.Tensor | None = None
    """Tokens (or sequences) of the whole minibatch on every rank: what the loss divides by."""
    horizon: int | None = None
    """``seq-mean-token-sum-norm``'s constant divisor (the longest response allowed)."""

    @property
    def active_correction(self) -> OffPolicyCorrection | None:
        """The correction to apply, ``None`` when off."""
        return self.correction if self.correction is not None and self.correction.active \
            else None


LossMath = Callable[..., tuple[torch.Tensor, dict[str, Any]]]
PolicyLoss = Callable[..., tuple[torch.Tensor, dict[str, float]]]


def policy_loss(
    *, default_agg_mode: str, applies_tis: bool = False
) -> Callable[[LossMath], PolicyLoss]:
    """Turn a loss's math into a policy loss called with :class:`PolicyLossInputs`.

    ``default_agg_mode``: the aggregation when the inputs name none. With ``applies_tis``
    the math gets ``rollout_log_probs`` and ``correction`` and weights the losses itself
    (GMPO weights whole sequences, not tokens).
    """

    def decorate(math: LossMath) -> PolicyLoss:
        def loss(inputs: PolicyLossInputs, **options: Any) -> tuple[torch.Tensor, dict[str, float]]:
            active = inputs.active_correction
            rollout = inputs.rollout_log_probs
            if applies_tis:
                options.update(rollout_log_probs=rollout, correction=active)
                rollout, active = None, None
            pg_losses, metrics = math(
                inputs.old_log_prob, inputs.log_prob, inputs.advantages, inputs.response_mask,
                clip_low=inputs.clip_low, clip_high=inputs.clip_high,
                clip_ratio_c=inputs.clip_ratio_c, **options)
            pg_losses = apply_correction(pg_losses, inputs.old_log_prob, rollout,
                                         inputs.response_mask, active, metrics)
            total = agg_loss(pg_losses, inputs.response_mask,
                             inputs.loss_agg_mode or default_agg_mode,
                             global_normalizer=inputs.global_normalizer, horizon=inputs.horizon)
            return total, {k: float(v) for k, v in metrics.items()}

        # What inspect/help show: the inputs, then the math's own options (clip bounds and
        # tensors come from the inputs).
        signature = _options_signature(math)
        functools.update_wrapper(loss, math)
        loss.__signature__ = signature  # type: ignore[attr-defined]
        return loss

    return decorate


def _options_signature(math: LossMath) -> inspect.Signature:
    """``(inputs: PolicyLossInputs, *, <the math's own keyword options>)``."""
    common = {"clip_low", "clip_high", "clip_ratio_c", "rollout_log_probs", "correction"}
    own = [p for p in inspect.signature(math).parameters.values()
           if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
           and p.name not in common]
    first = inspect.Parameter("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation="PolicyLossInputs")
    return inspect.Signature([first, *own], return_annotation="tuple[Tensor, dict[str, float]]")


def apply_correction(
    pg_losses: torch.Tensor,
    old_log_prob: torch.Tensor,
    rollout_log_probs: torch.Tensor | None,
    response_mask: torch.Tensor,
    correction: OffPolicyCorrection | None,
    metrics: dict[str, Any],
) -> torch.Tensor:
    """Multiply per-token losses ``[B, T]`` by the correction's weights (``None``: unchanged)."""
    if correction is None:
        return pg_losses
    if rollout_log_probs is None:
        raise ValueError(
            f"the {correction.method} off-policy correction is on but rollout_log_probs is "
            "missing: the rollout engine must return per-token log-probs, or set "
            '[algorithm.correction] method = "none"'
        )
    weights, correction_metrics = correction.weights(old_log_prob, rollout_log_probs,
                                                     response_mask)
    metrics.update(correction_metrics)
    return pg_losses * weights
