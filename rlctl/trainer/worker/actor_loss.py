"""The actor's loss for one micro-batch: registered policy loss + KL term - entropy bonus.

Built once per worker from the recipe and the registry; the engine calls it per micro-batch.
Every term is aggregated with the *global* normaliser (tokens or sequences of the whole
minibatch over all ranks), so micro-batch losses add up to the minibatch loss exactly and
the update does not depend on micro-batch size or rank count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlctl.config.recipe import Recipe


def build_actor_loss(recipe: Recipe, registry: Any, *, kl_coef: float) -> Callable[..., Any]:
    from rlctl.algorithms.aggregation import agg_loss
    from rlctl.algorithms.kl import kl_penalty

    loss_cfg = recipe.algorithm.loss
    kl_cfg = recipe.algorithm.kl
    reg = registry.get("policy_loss", loss_cfg.policy_loss)
    policy_loss = reg.load()
    options = dict(loss_cfg.options)
    if reg.options is not None:
        options = reg.options(**options).model_dump()
    use_kl_loss = kl_cfg.apply_in == "loss"
    # seq-mean-token-sum-norm divides by a constant horizon (Dr. GRPO), not the padded width.
    horizon = recipe.rollout.max_new_tokens

    def loss_fn(outputs: dict[str, Any], fields: dict[str, Any]) -> tuple[Any, dict[str, float]]:
        log_prob = outputs["log_probs"]  # [b, R]
        mask = fields["response_mask"]  # [b, R]
        gn = fields.get("global_normalizer")
        pg_loss, pg_metrics = policy_loss(
            old_log_prob=fields["old_log_probs"],
            log_prob=log_prob,
            advantages=fields["advantages"],
            response_mask=mask,
            loss_agg_mode=loss_cfg.agg,
            clip_low=loss_cfg.clip_low,
            clip_high=loss_cfg.clip_high,
            clip_ratio_c=loss_cfg.clip_ratio_c,
            rollout_log_probs=fields.get("rollout_log_probs"),
            tis_cap=loss_cfg.tis_cap,
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
            ent = agg_loss(entropy, mask, loss_cfg.agg, global_normalizer=gn, horizon=horizon)
            metrics["actor/entropy"] = float(ent.detach())
            if loss_cfg.entropy_coef > 0:
                loss = loss - loss_cfg.entropy_coef * ent
        ref = fields.get("ref_log_probs")
        if ref is not None:
            kl_mat = kl_penalty(log_prob, ref, kl_cfg.estimator)
            kl = agg_loss(kl_mat, mask, loss_cfg.agg, global_normalizer=gn, horizon=horizon)
            metrics["actor/kl"] = float(kl.detach())
            if use_kl_loss:
                loss = loss + kl_coef * kl
                metrics["actor/kl_loss"] = float(kl.detach())
        elif "ppo_kl" in pg_metrics:
            # No reference policy in this recipe: report the KL to the rollout-time policy.
            metrics["actor/kl"] = float(pg_metrics["ppo_kl"])
        return loss, metrics

    return loss_fn


def build_critic_loss(recipe: Recipe) -> Callable[..., Any]:
    """Clipped value loss (PPO), aggregated like the policy loss."""
    import torch

    from rlctl.algorithms.aggregation import agg_loss

    clip = recipe.critic.cliprange_value
    agg = recipe.algorithm.loss.agg

    def loss_fn(outputs: dict[str, Any], fields: dict[str, Any]) -> tuple[Any, dict[str, float]]:
        values = outputs["values"]  # [b, R]
        old = fields["values"]
        returns = fields["returns"]
        mask = fields["response_mask"]
        clipped = old + (values - old).clamp(-clip, clip)
        loss_mat = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        loss = agg_loss(loss_mat, mask, agg, global_normalizer=fields.get("global_normalizer"),
                        horizon=recipe.rollout.max_new_tokens)
        clipfrac = (((values - returns) ** 2 < (clipped - returns) ** 2).float() * mask).sum() / mask.sum().clamp(min=1)
        return loss, {"critic/vf_loss": float(loss.detach()), "critic/vf_clipfrac": float(clipfrac)}

    return loss_fn
