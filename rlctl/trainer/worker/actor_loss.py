"""The actor's loss for one micro-batch: registered policy loss + KL term - entropy bonus.

The terms are the tested ones of :mod:`rlctl.algorithms` (``kl_loss``, ``entropy_bonus``,
``compute_value_loss``); this module only wires them to the recipe.

Built once per worker from the recipe and the registry; the engine calls it per micro-batch.
Every term is aggregated with the *global* normaliser (tokens or sequences of the whole
minibatch over all ranks), so micro-batch losses add up to the minibatch loss exactly and
the update does not depend on micro-batch size or rank count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rlctl.config.recipe import Recipe


def build_actor_loss(
    recipe: Recipe, registry: Any, *, kl_coef: float, options: Mapping[str, Any],
    correction: Any = None, old_from_update: bool = False,
) -> Callable[..., Any]:
    """``options``: the policy loss's validated ``[algorithm.loss.options]`` as keywords;
    ``correction``: the resolved off-policy correction
    (:func:`rlctl.algorithms.off_policy.recipe_correction`), ``None`` for none.

    ``old_from_update``: no old log-prob pass ran (a provably on-policy update): the old
    log-probs are this forward's own, detached (the same values, so the same loss and
    gradient), and the rollout-vs-trainer probability gap is measured here instead.
    """
    from rlctl.algorithms.entropy import entropy_bonus
    from rlctl.algorithms.kl import kl_loss
    from rlctl.engines.train.metrics import token_stat

    loss_cfg = recipe.algorithm.loss
    kl_cfg = recipe.algorithm.kl
    policy_loss = registry.load("policy_loss", loss_cfg.policy_loss)
    use_kl_loss = kl_cfg.apply_in == "loss"
    # seq-mean-token-sum-norm divides by a constant horizon (Dr. GRPO), not the padded width.
    horizon = recipe.rollout.max_new_tokens
    if correction is not None and not correction.active:
        correction = None
    # Losses written against the older convention read a truncated-IS cap from tis_cap.
    tis_cap = correction.cap if correction is not None and \
        correction.method == "truncated_is" else None

    def loss_fn(outputs: dict[str, Any], fields: dict[str, Any]) -> tuple[Any, dict[str, float]]:
        log_prob = outputs["log_probs"]  # [b, R]
        mask = fields["response_mask"]  # [b, R]
        gn = fields.get("global_normalizer")
        old = log_prob.detach() if old_from_update else fields["old_log_probs"]
        pg_loss, pg_metrics = policy_loss(
            old_log_prob=old,
            log_prob=log_prob,
            advantages=fields["advantages"],
            response_mask=mask,
            loss_agg_mode=loss_cfg.agg,
            clip_low=loss_cfg.clip_low,
            clip_high=loss_cfg.clip_high,
            clip_ratio_c=loss_cfg.clip_ratio_c,
            rollout_log_probs=fields.get("rollout_log_probs") if correction is not None else None,
            tis_cap=tis_cap,
            correction=correction,
            global_normalizer=gn,
            horizon=horizon,
            **options,
        )
        loss = pg_loss
        metrics: dict[str, float] = {"actor/pg_loss": float(pg_loss.detach())}
        for name, value in pg_metrics.items():
            metrics[f"actor/{name}"] = float(value)
        entropy = outputs.get("entropy")
        if entropy is not None:
            # Per token over the whole minibatch (a token statistic, merged exactly across
            # micro-batches and ranks): the entropy of the policy on this step's samples.
            metrics["actor/entropy"] = token_stat(entropy, mask)
            if loss_cfg.entropy_coef > 0:
                bonus, _ = entropy_bonus(entropy, mask, loss_cfg.entropy_coef, loss_cfg.agg,
                                         global_normalizer=gn, horizon=horizon)
                loss = loss + bonus
        rollout = fields.get("rollout_log_probs")
        if old_from_update and rollout is not None:
            # How far the rollout engine's probabilities are from the trainer's (~0), as the
            # old log-prob pass reports it when it runs.
            metrics["training/rollout_probs_diff"] = token_stat(
                (log_prob.detach().exp() - rollout.exp()).abs(), mask)
        ref = fields.get("ref_log_probs")
        if ref is not None:
            kl, kl_metrics = kl_loss(log_prob, ref, mask, kl_cfg.estimator, loss_cfg.agg,
                                     global_normalizer=gn, horizon=horizon)
            metrics["actor/kl"] = kl_metrics["kl_loss"]
            if use_kl_loss:
                loss = loss + kl_coef * kl
                metrics["actor/kl_loss"] = kl_metrics["kl_loss"]
        elif "ppo_kl" in pg_metrics:
            # No reference policy in this recipe: report the KL to the rollout-time policy.
            metrics["actor/kl"] = float(pg_metrics["ppo_kl"])
        return loss, metrics

    return loss_fn


def build_critic_loss(recipe: Recipe) -> Callable[..., Any]:
    """Clipped value loss (PPO), aggregated like the policy loss."""
    from rlctl.algorithms.value_loss import compute_value_loss

    clip = recipe.critic.cliprange_value
    agg = recipe.algorithm.loss.agg

    def loss_fn(outputs: dict[str, Any], fields: dict[str, Any]) -> tuple[Any, dict[str, float]]:
        loss, metrics = compute_value_loss(
            outputs["values"], fields["returns"], fields["values"], fields["response_mask"],
            clip, agg, global_normalizer=fields.get("global_normalizer"),
            horizon=recipe.rollout.max_new_tokens,
        )  # all [b, R]
        return loss, {"critic/vf_loss": float(loss.detach()),
                      "critic/vf_clipfrac": metrics["vf_clipfrac"]}

    return loss_fn
