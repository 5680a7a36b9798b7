"""KL to the reference policy: estimators, coefficient controllers, reward penalty, loss term.

Estimators (Schulman, "Approximating KL divergence", 2020), with ``d = log pi - log pi_ref``:

* ``k1`` (alias ``kl``): ``d``; unbiased, high variance, can be negative.
* ``k2`` (alias ``mse``): ``d^2 / 2``.
* ``k3`` (alias ``low_var_kl``): ``exp(-d) + d - 1`` with ``-d`` clamped to [-20, 20] and the
  result to [-10, 10] (verl); unbiased and non-negative.
* ``abs``: ``|d|``.

A trailing ``+`` (``k1+``, ``k3+``) keeps the estimator's value but takes the gradient of
``k2`` (straight-through), which is the unbiased KL gradient (verl).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlctl.algorithms.aggregation import agg_loss
from rlctl.algorithms.masked import masked_mean

KL_ALIASES = {
    "kl": "k1",
    "k1": "k1",
    "mse": "k2",
    "k2": "k2",
    "low_var_kl": "k3",
    "k3": "k3",
    "abs": "abs",
}


def _kl_forward(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "k1":
        return log_prob - ref_log_prob
    if kind == "abs":
        return (log_prob - ref_log_prob).abs()
    if kind == "k2":
        return 0.5 * (log_prob - ref_log_prob).square()
    # k3: E_pi[r - log r - 1] with r = pi_ref / pi.
    log_r = torch.clamp(ref_log_prob - log_prob, min=-20, max=20)
    return torch.clamp(torch.exp(log_r) - log_r - 1, min=-10, max=10)


def kl_penalty(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kind: str = "k3"
) -> torch.Tensor:
    """Per-token KL estimate [B, T] of ``KL(pi || pi_ref)`` for samples drawn from pi."""
    straight_through = kind.endswith("+")
    base = KL_ALIASES.get(kind[:-1] if straight_through else kind)
    if base is None:
        raise ValueError(
            f"unknown KL estimator {kind!r}; choose k1, k2, k3 or abs (aliases kl, mse, "
            "low_var_kl; a trailing '+' takes the k2 gradient)"
        )
    forward = _kl_forward(log_prob, ref_log_prob, base)
    if not straight_through or base == "k2":
        return forward
    backward = 0.5 * (log_prob - ref_log_prob).square()
    return backward - backward.detach() + forward.detach()


class FixedKLController:
    """A constant KL coefficient; ``update`` is a no-op."""

    def __init__(self, coef: float) -> None:
        self.value = float(coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing to adapt."""

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "fixed", "value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _check_kind(state, "fixed")
        self.value = float(state["value"])


class AdaptiveKLController:
    """Adaptive KL coefficient of Ziegler et al. (1909.08593), as in verl.

    ``value *= 1 + clip(current_kl / target - 1, -0.2, 0.2) * n_steps / horizon``.
    """

    def __init__(self, init: float, target: float, horizon: int) -> None:
        if target <= 0 or horizon <= 0:
            raise ValueError(
                f"adaptive KL needs target > 0 and horizon > 0, got {target} and {horizon}"
            )
        self.value = float(init)
        self.target = float(target)
        self.horizon = int(horizon)

    def update(self, current_kl: float, n_steps: int) -> None:
        """Move the coefficient towards keeping ``current_kl`` at ``target``."""
        error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
        self.value *= 1 + error * n_steps / self.horizon

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "adaptive",
            "value": self.value,
            "target": self.target,
            "horizon": self.horizon,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the coefficient; ``target``/``horizon`` keep the values of the current recipe."""
        _check_kind(state, "adaptive")
        self.value = float(state["value"])


def _check_kind(state: dict[str, Any], expected: str) -> None:
    kind = state.get("kind", expected)
    if kind != expected:
        raise ValueError(
            f"checkpoint holds a {kind!r} KL controller but the recipe asks for {expected!r}; "
            "set [algorithm.kl] controller to match or start a fresh run"
        )


def make_kl_controller(
    controller: str, coef: float, *, target: float = 6.0, horizon: int = 10000
) -> FixedKLController | AdaptiveKLController:
    """Build the controller named in ``[algorithm.kl] controller`` (``fixed`` | ``adaptive``)."""
    if controller == "fixed":
        return FixedKLController(coef)
    if controller == "adaptive":
        return AdaptiveKLController(coef, target, horizon)
    raise ValueError(f"unknown KL controller {controller!r}; choose fixed or adaptive")


@torch.no_grad()
def apply_kl_penalty_to_rewards(
    token_level_scores: torch.Tensor,
    old_log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    coef: float,
    kind: str = "k1",
) -> tuple[torch.Tensor, dict[str, float]]:
    """``rewards = scores - coef * KL`` per token, KL zeroed outside the response.

    Metrics: ``reward_kl_penalty`` (batch mean of the per-sequence mean KL: feed it to the
    controller's ``update(current_kl, n_steps=B)``) and ``reward_kl_penalty_coeff`` (verl's
    names without the ``actor/`` prefix).
    """
    kld = kl_penalty(old_log_probs, ref_log_probs, kind) * response_mask
    rewards = token_level_scores - coef * kld
    current_kl = masked_mean(kld, response_mask, dim=-1).mean()
    return rewards, {"reward_kl_penalty": float(current_kl), "reward_kl_penalty_coeff": float(coef)}


def kl_loss(
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kind: str = "k3",
    loss_agg_mode: str = "token-mean",
    *,
    global_normalizer: float | torch.Tensor | None = None,
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The KL loss term (``[algorithm.kl] in = "loss"``), before multiplying by the coefficient.

    Returns the aggregated KL (scalar, with gradient) and ``{"kl_loss": value}``; the actor
    adds ``coef * kl`` to the policy loss.
    """
    kld = kl_penalty(log_prob, ref_log_prob, kind)
    loss = agg_loss(
        kld, response_mask, loss_agg_mode, global_normalizer=global_normalizer, horizon=horizon
    )
    return loss, {"kl_loss": float(loss.detach())}
