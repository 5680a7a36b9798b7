"""The actor's loss for one micro-batch: registered policy loss + KL term - entropy bonus.

The terms are the tested ones of :mod:`rlctl.algorithms` (``kl_loss``, ``entropy_bonus``,
``compute_value_loss``); this module only wires them to the recipe and the step plan.

Built once per worker (:class:`ActorLoss`); the training worker calls it per micro-batch with
what changes between calls: the minibatch's *global* normaliser (tokens or sequences of the
whole minibatch over all ranks, so micro-batch losses add up to the minibatch loss exactly and
the update does not depend on micro-batch size or rank count) and the KL coefficient (an
adaptive controller moves it between steps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlctl.config.algorithm import AlgorithmSection
from rlctl.trainer.plan import StepPlan


def rollout_probs_gap(log_probs: Any, rollout_log_probs: Any, mask: Any) -> Any:
    """``|p_trainer - p_rollout|`` per token ``[B, R]`` as a token statistic over ``mask``:
    ``training/rollout_probs_diff``, how far the rollout engine's probabilities are from the
    trainer's (about 0). Measured where the plan says (:attr:`StepPlan.probs_gap`)."""
    from rlctl.engines.train.metrics import token_stat

    return token_stat((log_probs.detach().exp() - rollout_log_probs.exp()).abs(), mask)


class ActorLoss:
    """``loss(outputs, fields, normalizer=, kl_coef=) -> (loss, metrics)`` for one micro-batch.

    ``outputs``: the engine's ``log_probs`` and ``entropy`` ``[b, R]`` (with grad);
    ``fields``: the worker's per-sample fields sliced to the micro-batch (``response_mask``,
    ``advantages``, ``old_log_probs`` unless the update gives them, ``ref_log_probs`` with a
    KL in the loss, ``rollout_log_probs`` when the plan reads them).
    """

    def __init__(self, plan: StepPlan, algorithm: AlgorithmSection, registry: Any, *,
                 options: Mapping[str, Any], horizon: int) -> None:
        """``options``: the policy loss's validated ``[algorithm.loss.options]`` as keywords;
        ``horizon``: ``seq-mean-token-sum-norm``'s constant divisor (Dr. GRPO), the longest
        response allowed, not the padded width."""
        self.plan = plan
        self.loss = algorithm.loss
        self.kl = algorithm.kl
        self.policy_loss = registry.load("policy_loss", self.loss.policy_loss)
        self.options = dict(options)
        self.horizon = horizon

    def __call__(self, outputs: dict[str, Any], fields: dict[str, Any], *,
                 normalizer: float, kl_coef: float) -> tuple[Any, dict[str, Any]]:
        from rlctl.algorithms.policy_loss_inputs import PolicyLossInputs

        log_prob = outputs["log_probs"]  # [b, R]
        mask = fields["response_mask"]  # [b, R]
        from_update = not self.plan.old_log_prob_pass
        # the update's own forward gives the old log-probs: the same values, detached
        old = log_prob.detach() if from_update else fields["old_log_probs"]
        rollout = fields.get("rollout_log_probs")
        loss, pg_metrics = self.policy_loss(PolicyLossInputs(
            old_log_prob=old, log_prob=log_prob, advantages=fields["advantages"],
            response_mask=mask, loss_agg_mode=self.loss.agg, clip_low=self.loss.clip_low,
            clip_high=self.loss.clip_high, clip_ratio_c=self.loss.clip_ratio_c,
            rollout_log_probs=rollout if self.plan.correction.active else None,
            correction=self.plan.correction, global_normalizer=normalizer,
            horizon=self.horizon,
        ), **self.options)
        metrics: dict[str, Any] = {"actor/pg_loss": float(loss.detach())}
        metrics.update({f"actor/{name}": float(value) for name, value in pg_metrics.items()})
        bonus = self._entropy_term(outputs.get("entropy"), mask, normalizer, metrics)
        if bonus is not None:
            loss = loss + bonus
        if from_update and rollout is not None:
            metrics["training/rollout_probs_diff"] = rollout_probs_gap(log_prob, rollout, mask)
        ref = fields.get("ref_log_probs")
        if ref is not None:
            kl = self._kl_term(log_prob, ref, mask, normalizer, kl_coef, metrics)
            if kl is not None:
                loss = loss + kl
        elif "ppo_kl" in pg_metrics:
            # No reference policy in this recipe: report the KL to the rollout-time policy.
            metrics["actor/kl"] = float(pg_metrics["ppo_kl"])
        return loss, metrics

    def _entropy_term(self, entropy: Any, mask: Any, normalizer: float,
                      metrics: dict[str, Any]) -> Any:
        """``-coef * agg(entropy)`` (``None`` without a bonus); logs the per-token entropy."""
        if entropy is None:
            return None
        from rlctl.algorithms.entropy import entropy_bonus
        from rlctl.engines.train.metrics import token_stat

        # Per token over the whole minibatch (a token statistic, merged exactly across
        # micro-batches and ranks): the entropy of the policy on this step's samples.
        metrics["actor/entropy"] = token_stat(entropy, mask)
        if self.loss.entropy_coef <= 0:
            return None
        bonus, _ = entropy_bonus(entropy, mask, self.loss.entropy_coef, self.loss.agg,
                                 global_normalizer=normalizer, horizon=self.horizon)
        return bonus

    def _kl_term(self, log_prob: Any, ref: Any, mask: Any, normalizer: float, kl_coef: float,
                 metrics: dict[str, Any]) -> Any:
        """``kl_coef * KL(policy || reference)`` with the KL in the loss, else ``None`` (the KL
        in the reward is already in the advantages); logs the KL either way."""
        from rlctl.algorithms.kl import kl_loss

        kl, kl_metrics = kl_loss(log_prob, ref, mask, self.kl.estimator, self.loss.agg,
                                 global_normalizer=normalizer, horizon=self.horizon)
        metrics["actor/kl"] = kl_metrics["kl_loss"]
        if self.plan.kl.value != "loss":
            return None
        metrics["actor/kl_loss"] = kl_metrics["kl_loss"]
        return kl_coef * kl


def build_critic_loss(algorithm: AlgorithmSection, cliprange_value: float,
                      horizon: int) -> Callable[..., Any]:
    """Clipped value loss (PPO), aggregated like the policy loss:
    ``loss(outputs, fields, normalizer=) -> (loss, metrics)``."""
    from rlctl.algorithms.value_loss import compute_value_loss

    agg = algorithm.loss.agg

    def loss_fn(outputs: dict[str, Any], fields: dict[str, Any], *,
                normalizer: float) -> tuple[Any, dict[str, float]]:
        loss, metrics = compute_value_loss(
            outputs["values"], fields["returns"], fields["values"], fields["response_mask"],
            cliprange_value, agg, global_normalizer=normalizer, horizon=horizon,
        )  # all [b, R]
        return loss, {"critic/vf_loss": float(loss.detach()),
                      "critic/vf_clipfrac": metrics["vf_clipfrac"]}

    return loss_fn
