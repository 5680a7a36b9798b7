"""Off-policy corrections: reweighting the policy loss of samples other weights generated.

Three policies meet in one update, per response token ``t``:

* ``pi_behav``: the rollout engine's, which generated the token (``rollout_log_probs``);
* ``pi_prox``: the weights that train this step, i.e. the trainer's old-log-prob pass
  before the update (``old_log_probs``; the PPO ratio and its clip are taken against it);
* ``pi_theta``: the weights being optimised.

In sync training ``pi_behav`` and ``pi_prox`` differ only by kernel numerics; streamed
samples (``[algorithm.staleness]`` with ``max_staleness = k > 0``) come from weights up to
``k`` updates old. With ``r_t = pi_prox / pi_behav = exp(old_log_prob_t - rollout_log_prob_t)``
a correction multiplies each token's policy loss by a constant weight ``w_t`` (no gradient):

* ``none``: ``w = 1`` (no weight is computed);
* ``truncated_is``: ``w = min(r, cap)`` (TIS; verl's ``tis_imp_ratio_cap``);
* ``masked_is``: ``w = r`` inside ``[low, high]`` and ``0`` outside (MIS): at ``level =
  "token"`` per token; at ``level = "sequence"`` one ratio per response, the geometric
  mean ``R = exp(mean_t log r_t)`` (the plain product under- or overflows over long
  responses), put on every token of it;
* ``decoupled_ppo``: ``w = r``, and tokens with ``r > cap`` are masked out (AReaL's
  decoupled PPO objective with ``behav_imp_weight_cap``, default 5 here). With the
  clip around ``pi_prox`` this is ``-A * sg[pi_prox / pi_behav] * clip(pi_theta / pi_prox)``.

Masked tokens still count in the loss's normaliser (tokens or sequences of the batch), as in
AReaL: a masked token contributes zero, it does not make the others weigh more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

Method = Literal["none", "truncated_is", "masked_is", "decoupled_ppo"]
METHODS: tuple[str, ...] = ("none", "truncated_is", "masked_is", "decoupled_ppo")
# Log-ratios are clamped before exp() (as the policy losses do): a wild token cannot overflow.
LOG_RATIO_CLAMP = 20.0
# What "auto" picks: no correction in sync training (numbers unchanged), and when streaming
# AReaL's decoupled objective, masking tokens whose weight exceeds AReaL's usual cap of 5.
DEFAULT_DECOUPLED_CAP = 5.0
DEFAULT_TIS_CAP = 2.0


@dataclass(frozen=True)
class OffPolicyCorrection:
    """One resolved correction (the recipe's ``[algorithm.correction]`` after ``auto``)."""

    method: Method
    cap: float | None = None
    """``truncated_is``: the weight cap; ``decoupled_ppo``: weights above it are masked
    (``None``: nothing is masked)."""
    low: float = 0.0
    """``masked_is``: ratios below this are masked."""
    high: float = float("inf")
    """``masked_is``: ratios above this are masked."""
    level: Literal["token", "sequence"] = "token"
    """``masked_is``: mask single tokens or whole responses."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown off-policy correction {self.method!r}; use one of "
                             f"{', '.join(METHODS)}")
        if self.method == "truncated_is" and (self.cap is None or self.cap <= 0):
            raise ValueError(f"truncated_is needs a positive cap, got {self.cap}")
        if self.method == "decoupled_ppo" and self.cap is not None and self.cap <= 1:
            raise ValueError(f"decoupled_ppo's cap must be > 1 (it masks weights above it), "
                             f"got {self.cap}")
        if self.method == "masked_is" and not 0 <= self.low < self.high:
            raise ValueError(f"masked_is needs 0 <= low < high, got low = {self.low}, "
                             f"high = {self.high}")

    @property
    def active(self) -> bool:
        """Whether the loss is reweighted at all (it needs the rollout log-probs then)."""
        return self.method != "none"

    def weights(
        self, old_log_prob: torch.Tensor, rollout_log_probs: torch.Tensor,
        response_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Per-token weights [B, T] (detached, 0 outside the response) and their metrics.

        Metrics: ``is_weight_mean`` (mean weight over response tokens, after truncation or
        masking), ``rollout_kl`` (k1 estimate of KL(behaviour || proximal)); plus
        ``tis_clipfrac`` and ``tis_weight_mean`` (truncated_is: share of tokens truncated,
        the mean under its old name) or ``is_masked_frac`` (masked_is, decoupled_ppo:
        share of response tokens masked out).
        """
        import torch

        from rlctl.algorithms.masked import masked_mean

        if rollout_log_probs.shape != old_log_prob.shape:
            raise ValueError(
                f"rollout_log_probs {tuple(rollout_log_probs.shape)} must match old_log_prob "
                f"{tuple(old_log_prob.shape)}")
        with torch.no_grad():
            inside = response_mask.bool()
            log_ratio = torch.where(inside, old_log_prob - rollout_log_probs,
                                    torch.zeros_like(old_log_prob))
            log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # [B, T]
            ratio = torch.exp(log_ratio)
            metrics: dict[str, Any] = {}
            if self.method == "none":
                weights = torch.ones_like(ratio)
            elif self.method == "truncated_is":
                weights = ratio.clamp(max=self.cap)
                metrics["tis_clipfrac"] = masked_mean((ratio > self.cap).to(ratio.dtype),
                                                      response_mask)
            else:
                keep = self._keep(ratio, log_ratio, response_mask)
                weights = torch.where(keep, self._kept_weight(ratio, log_ratio, response_mask),
                                      torch.zeros_like(ratio))
                metrics["is_masked_frac"] = masked_mean((~keep).to(ratio.dtype), response_mask)
            # Zero outside the response: a garbage ratio on padding never reaches a gradient.
            weights = torch.where(inside, weights, torch.zeros_like(weights))
            metrics["is_weight_mean"] = masked_mean(weights, response_mask)
            if self.method == "truncated_is":
                metrics["tis_weight_mean"] = metrics["is_weight_mean"]
            metrics["rollout_kl"] = masked_mean(rollout_log_probs - old_log_prob, response_mask)
        return weights, {k: float(v) for k, v in metrics.items()}

    def _sequence_log_ratio(self, log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, 1]: mean log-ratio over each response (0 for an empty one)."""
        m = mask.to(log_ratio.dtype)
        return ((log_ratio * m).sum(-1) / m.sum(-1).clamp(min=1)).unsqueeze(-1)

    def _keep(self, ratio: torch.Tensor, log_ratio: torch.Tensor,
              mask: torch.Tensor) -> torch.Tensor:
        """bool [B, T]: which weights survive the mask."""
        import torch

        if self.method == "decoupled_ppo":
            return ratio <= self.cap if self.cap is not None else torch.ones_like(ratio).bool()
        if self.level == "sequence":
            seq = torch.exp(self._sequence_log_ratio(log_ratio, mask))  # [B, 1]
            return ((seq >= self.low) & (seq <= self.high)).expand_as(ratio)
        return (ratio >= self.low) & (ratio <= self.high)

    def _kept_weight(self, ratio: torch.Tensor, log_ratio: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
        import torch

        if self.method == "masked_is" and self.level == "sequence":
            return torch.exp(self._sequence_log_ratio(log_ratio, mask)).expand_as(ratio)
        return ratio


def truncated_is_weights(
    old_log_prob: torch.Tensor, rollout_log_probs: torch.Tensor, response_mask: torch.Tensor,
    cap: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Truncated IS weights ``min(r, cap)`` [B, T] and their metrics (the ``truncated_is``
    correction as one call)."""
    return OffPolicyCorrection("truncated_is", cap=cap).weights(
        old_log_prob, rollout_log_probs, response_mask)


def resolve_correction(section: Any, *, max_staleness: int) -> OffPolicyCorrection:
    """The correction a recipe trains with.

    ``section``: ``[algorithm.correction]``; ``max_staleness``: the staleness policy's
    bound k. ``auto`` is ``none`` at k = 0 (sync training, its numbers
    unchanged) and ``decoupled_ppo`` (cap 5) when streaming.
    """
    method = section.method
    if method == "auto":
        method = "none" if max_staleness == 0 else "decoupled_ppo"
    if method == "truncated_is":
        return OffPolicyCorrection(method, cap=section.cap if section.cap is not None
                                   else DEFAULT_TIS_CAP)
    if method == "masked_is":
        return OffPolicyCorrection(method, low=section.low, high=section.high,
                                   level=section.level)
    if method == "decoupled_ppo":
        return OffPolicyCorrection(method, cap=section.cap if section.cap is not None
                                   else DEFAULT_DECOUPLED_CAP)
    return OffPolicyCorrection("none")


def recipe_correction(loaded: Any) -> OffPolicyCorrection:
    """:func:`resolve_correction` for a loaded recipe (its staleness policy gives k)."""
    from rlctl.algorithms.staleness import policy_of

    recipe = loaded.recipe
    return resolve_correction(recipe.algorithm.correction,
                              max_staleness=policy_of(loaded).max_staleness)


def correction_notes(loaded: object) -> list[str]:
    """Notes on the recipe's off-policy correction (``config validate`` prints them).

    Streamed samples come from weights up to k updates old; ``method = "none"`` treats
    them as on-policy. Legal (k = 1 often trains fine), so a note, not an error.
    """
    from rlctl.algorithms.staleness import policy_of

    recipe = loaded.recipe  # type: ignore[attr-defined]
    notes = []
    k = policy_of(loaded).max_staleness
    if k > 0 and not recipe_correction(loaded).active:
        notes.append(
            f"note: algorithm.staleness: {recipe.algorithm.staleness.policy!r} trains samples "
            f"up to {k} weight update(s) old with no off-policy correction "
            '([algorithm.correction] method = "none"); use "decoupled_ppo" (what "auto" '
            'picks), "truncated_is" or "masked_is" to weight them against the rollout '
            "engine's log-probs (docs/streaming.md)")
    return notes
