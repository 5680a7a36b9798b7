"""The advantage phase, run inside training workers on whole groups (group-aware dispatch).

Reads only the fields the registered estimator declared, turns per-sample scores into
token-level rewards (optionally minus the KL penalty), runs the estimator, and writes
``advantages`` / ``returns`` back as jagged fields. Returns scalar partials only.

Two ways in: :func:`run_advantage_phase` is the phase of its own (read, compute, write);
without a critic the actor update calls :func:`compute_advantages` on rows it read anyway,
on a shard that holds whole groups too (``TrainingWorker.update_actor``), and trains on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlctl.config.recipe import Recipe
from rlctl.protocol.kv import KVBatchMeta
from rlctl.trainer import metric_reduce as mr
from rlctl.trainer.worker.fields import (
    generated_lengths,
    loss_mask_of,
    mask_from_lengths,
    to_jagged,
    to_padded,
)
from rlctl.trainer.worker.reward_sections import effective_rewards, reward_fields
from rlctl.trainer.worker.sessions import (
    agent_partials,
    component_partials,
    estimate_by_session,
    place_scores,
)

# estimator `requires` name -> data-plane field holding it
REQUIRED_FIELDS = {
    "values": "values",
    "old_log_probs": "old_log_probs",
    "ref_log_probs": "ref_log_probs",
    "reward_baselines": "reward_baselines",
    "sum_pi_squared": "sum_pi_squared",
}


def advantage_inputs(recipe: Recipe, registry: Any) -> list[str]:
    """The fields the advantage phase reads: scores, rewards, the loss mask and whatever the
    estimator (and the KL-in-reward penalty) declared."""
    alg = recipe.algorithm
    requires = set(registry.get("advantage_estimator", alg.estimator).metadata.get("requires", ()))
    wanted = ["score"]
    wanted += [REQUIRED_FIELDS[r] for r in sorted(requires) if r in REQUIRED_FIELDS]
    if alg.kl.apply_in == "reward":
        wanted += ["old_log_probs", "ref_log_probs"]
    wanted += reward_fields(recipe, registry)
    wanted.append("loss_mask")
    return list(dict.fromkeys(wanted))


def run_advantage_phase(
    plane: Any, meta: KVBatchMeta, recipe: Recipe, registry: Any, *, kl_coef: float,
    options: Mapping[str, Any],
) -> dict[str, mr.Partial]:
    """The phase on its own: read :func:`advantage_inputs`, compute, put ``advantages`` and
    ``returns`` (and ``token_level_rewards`` with the KL in the reward) as jagged fields.
    ``options``: the estimator's validated ``[algorithm.estimator_options]`` as keywords."""
    if len(meta) == 0:
        return {}
    keys = list(meta.keys)
    td = plane.kv_batch_get(keys, meta.partition_id, advantage_inputs(recipe, registry))
    outputs, partials = compute_advantages(plane, meta, td, recipe, registry, kl_coef=kl_coef,
                                           options=options)
    lengths = [int(x) for x in meta.tag_values("response_len")]
    from tensordict import TensorDict

    jagged = {name: to_jagged(value.float(), lengths) for name, value in outputs.items()}
    plane.kv_batch_put(keys, meta.partition_id, TensorDict(jagged, batch_size=[len(keys)]))
    return partials


def compute_advantages(
    plane: Any, meta: KVBatchMeta, td: Any, recipe: Recipe, registry: Any, *, kl_coef: float,
    options: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, mr.Partial]]:
    """Advantages of ``meta``'s samples from ``td`` (their :func:`advantage_inputs`, rows in
    ``meta``'s order): ``({"advantages", "returns"[, "token_level_rewards"]}: [B, R] each,
    scalar partials)``. ``plane`` is read only for outputs that carry per-token rewards."""
    alg = recipe.algorithm
    reg = registry.get("advantage_estimator", alg.estimator)
    requires = set(reg.metadata.get("requires", ()))
    keys = list(meta.keys)
    lengths = [int(x) for x in meta.tag_values("response_len")]
    width = max(lengths)
    # [B, R]: generated tokens only; observation tokens get no reward and no advantage
    mask = mask_from_lengths(lengths, width) * loss_mask_of(td, lengths, width)
    scores = td["score"].float().reshape(-1)  # [B]
    token_rewards = place_scores(plane, meta, scores, mask, lengths)
    partials: dict[str, mr.Partial] = {}
    if alg.kl.apply_in == "reward":
        token_rewards, partials = _kl_in_reward(token_rewards, td, lengths, mask, kl_coef,
                                                alg.kl.estimator, len(keys))
    extra = {req: to_padded(td[REQUIRED_FIELDS[req]], lengths)
             for req in requires if req in REQUIRED_FIELDS}
    # Sessions with several outputs: group statistics count each session once (sessions.py).
    advantages, returns = estimate_by_session(  # [B, R] each
        checked_estimator(reg), keys, bool(reg.metadata.get("group_based", False)),
        rows=dict(token_level_rewards=token_rewards, response_mask=mask, **extra),
        index=meta.tag_values("uid"),
        reward_components={r.name: td[f"reward/{r.name}"].float().reshape(-1)
                           for r in effective_rewards(recipe, registry)},
        constants=dict(gamma=alg.gamma, lam=alg.lam, norm_adv_by_std_in_grpo=alg.norm_adv_by_std,
                       epsilon=1e-6, **options),
    )
    outputs = {"advantages": advantages, "returns": returns}
    if alg.kl.apply_in == "reward":
        outputs["token_level_rewards"] = token_rewards
    partials.update(_partials(meta, td, scores, token_rewards, advantages, returns, mask,
                              reward_fields(recipe, registry)))
    return outputs, partials


def _kl_in_reward(token_scores: Any, td: Any, lengths: list[int], mask: Any, kl_coef: float,
                  estimator: str, samples: int) -> tuple[Any, dict[str, mr.Partial]]:
    """Token rewards ``[B, R]`` minus the KL penalty to the reference, and its metrics."""
    from rlctl.algorithms.kl import apply_kl_penalty_to_rewards

    old = to_padded(td["old_log_probs"], lengths)
    ref = to_padded(td["ref_log_probs"], lengths)
    token_rewards, kl_metrics = apply_kl_penalty_to_rewards(token_scores, old, ref, mask,
                                                            kl_coef, estimator)
    return token_rewards, {f"critic/{name}": mr.scalar_partial(float(value), samples)
                           for name, value in kl_metrics.items()}


def checked_estimator(reg: Any) -> Any:
    """The registered estimator, called on keyword inputs (every row, or one row per
    session): an exception or a result that is not two tensors shaped like the mask names
    the plugin, the estimator and the line."""
    from rlctl.plugin_errors import PluginCallError

    estimator = reg.load()

    def checked(**inputs: Any) -> tuple[Any, Any]:
        import torch

        try:
            result = estimator(**inputs)
        except Exception as exc:  # name the plugin, the estimator and the line that raised
            raise PluginCallError.from_exception(reg, exc, estimator) from exc
        shape = inputs["response_mask"].shape
        if not (isinstance(result, tuple) and len(result) == 2 and all(
                isinstance(t, torch.Tensor) and t.shape == shape for t in result)):
            got = [f"{type(t).__name__}{list(t.shape) if isinstance(t, torch.Tensor) else ''}"
                   for t in (result if isinstance(result, tuple) else (result,))]
            raise PluginCallError.contract(
                reg, f"returned ({', '.join(got)}); expected (advantages, returns), two tensors "
                f"shaped like response_mask {list(shape)}")
        return result

    return checked


def _partials(meta: KVBatchMeta, td: Any, scores: Any, token_rewards: Any, advantages: Any,
              returns: Any, mask: Any, reward_names: list[str]) -> dict[str, mr.Partial]:
    """The phase's metric partials (scores, rewards, advantages, lengths, each reward)."""
    valid = mask.bool()
    partials = {
        "critic/score": mr.partial_of(scores.tolist()),
        "critic/rewards": mr.partial_of((token_rewards * mask).sum(-1).tolist()),
        "critic/advantages": mr.partial_of(advantages[valid].tolist()),
        "critic/returns": mr.partial_of(returns[valid].tolist()),
        "response_length": mr.partial_of(generated_lengths(meta)),
        "prompt_length": mr.partial_of(meta.tag_values("prompt_len")),
        "response_length/clip_ratio": mr.partial_of(
            [1.0 if f == "length" else 0.0 for f in meta.tag_values("finish_reason")]),
    }
    for name in reward_names:  # each reward logged on its own, e.g. reward/digits_match
        partials[name] = mr.partial_of(td[name].float().reshape(-1).tolist())
    partials.update(agent_partials(meta) | component_partials(meta))  # + reward/<name>/<part>
    return partials
