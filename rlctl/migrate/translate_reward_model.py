"""verl -> rlctl for where a config keeps its reward settings, and for a reward model.

verl moved its reward settings in v0.7.1: up to v0.7.0 they live in ``reward_model.*``,
``reward_manager.*`` and ``custom_reward_function.*``; from v0.7.1 in ``reward.*``, while the
old keys stay in the config (all null) and verl copies any that a script sets into
``reward.*`` before it runs (``migrate_legacy_reward_impl``). :func:`reward_keys` finds, for
each setting, the key verl reads, so the translators read one place whatever the release.

A discriminative reward model (up to v0.7.0, ``reward_model.enable``): verl scores every
response with the checkpoint at ``reward_model.model.path`` and its reward managers return
that score alone (``rm_scores``). The migrated recipe has one ``[[rewards]] name =
"reward_model"``; rlctl's reward worker reads the policy's own tokens, which is what verl does
with ``model.input_tokenizer = null``. From v0.7.1 verl serves the reward model on its own
inference server and re-renders each sample with the reward model's chat template, which
rlctl does not: such a run is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlctl.migrate.ledger import Ledger

RM = "reward_model"
LAYOUT = "placement of verl's reward-model workers: rlctl's run in [engines.reward]"
LEGACY = "verl's pre-0.7.1 reward key, unset: verl reads reward.* instead"


@dataclass(frozen=True)
class RewardKeys:
    """The keys verl reads for each reward setting, in this config."""

    new: bool
    """v0.7.1+ layout (``reward.*``)."""
    manager: str
    kwargs: str
    """Prefix of the reward manager's keyword arguments (the dapo manager's overlong buffer)."""
    custom: str
    """Prefix of the custom reward function (``.path``, ``.name``)."""
    rm_enable: str
    rm_path: str
    workers: str


def reward_keys(lg: Ledger) -> RewardKeys:
    """Where verl reads the reward settings; legacy copies that are unset are accounted for."""
    if "reward.reward_manager.name" not in lg.cfg:
        return RewardKeys(False, f"{RM}.reward_manager", f"{RM}.reward_kwargs",
                          "custom_reward_function", f"{RM}.enable", f"{RM}.model.path",
                          f"{RM}.num_workers")

    def pick(legacy: str, new: str) -> str:
        if lg.value(legacy) is not None:  # verl copies a legacy key the script set
            lg.drop(new, f"replaced by {legacy} (verl copies it here)")
            return legacy
        lg.drop(legacy, LEGACY)
        return new

    custom_set = any(lg.value(k) is not None for k in lg.cfg.under("custom_reward_function"))
    custom = "custom_reward_function" if custom_set else "reward.custom_reward_function"
    kwargs = f"{RM}.reward_kwargs" if any(lg.cfg.under(f"{RM}.reward_kwargs")) \
        else "reward.reward_kwargs"
    keys = RewardKeys(True, pick(f"{RM}.reward_manager", "reward.reward_manager.name"), kwargs,
                      custom, pick(f"{RM}.enable", "reward.reward_model.enable"),
                      pick(f"{RM}.model.path", "reward.reward_model.model_path"),
                      pick(f"{RM}.num_workers", "reward.num_workers"))
    for prefix in (RM, "custom_reward_function", "sandbox_fusion"):
        for key in list(lg.cfg.under(prefix)):
            if lg.value(key) is None and lg.is_open(key):
                lg.drop(key, LEGACY)
    return keys


def translate_reward_model(lg: Ledger, keys: RewardKeys) -> dict[str, Any] | None:
    """The ``[[rewards]]`` entry of the reward model, or None when it is off (or refused)."""
    if not lg.value(keys.rm_enable):
        lg.drop(keys.rm_enable, "off: no reward model")
        return None
    if keys.new:
        lg.conflict(keys.rm_enable, "verl (v0.7.1+) serves the reward model on its own inference "
                    "server and re-renders each sample with the reward model's chat template; "
                    "rlctl's reward_model reads the policy's own tokens",
                    "score with a rule reward (--reward), or keep this run on verl")
        return None
    lg.take(keys.rm_enable, "rewards")
    tokenizer = lg.value(f"{RM}.model.input_tokenizer")
    if tokenizer is not None:
        lg.conflict(f"{RM}.model.input_tokenizer", f"{tokenizer!r}: verl decodes each response "
                    "and re-renders it with the reward model's chat template; rlctl's reward "
                    "model reads the policy's own tokens", f"set {RM}.model.input_tokenizer=null "
                    "when the reward model shares the policy's tokenizer and chat template")
    else:
        lg.drop(f"{RM}.model.input_tokenizer", "null: the reward model reads the policy's tokens")
    return _old_reward_model(lg)


def _old_reward_model(lg: Ledger) -> dict[str, Any]:
    lg.drop(f"{RM}.max_length", "used only when re-rendering with input_tokenizer")
    path = lg.take(f"{RM}.model.path", "rewards.options.path")
    options: dict[str, Any] = {"path": str(path)}
    if lg.take(f"{RM}.model.trust_remote_code", "rewards.options.trust_remote_code"):
        options["trust_remote_code"] = True
    micro = lg.value(f"{RM}.micro_batch_size_per_gpu")
    if micro is not None:
        lg.take(f"{RM}.micro_batch_size_per_gpu", "rewards.options.micro_batch_size")
        options["micro_batch_size"] = int(micro)
    else:
        lg.drop(f"{RM}.micro_batch_size_per_gpu", "unset: rlctl's default micro-batch")
    lg.drop(f"{RM}.micro_batch_size", "forward micro-batch (memory)")
    for key in ("use_dynamic_bsz", "forward_max_token_len_per_gpu", "strategy", "use_reward_loop"):
        lg.drop(f"{RM}.{key}", "how verl batches and runs the reward model (no math effect)")
    for key in ("enable_resource_pool", "n_gpus_per_node", "nnodes"):
        lg.drop(f"{RM}.{key}", LAYOUT)
    workers = lg.take(f"{RM}.num_workers", "engines.reward.workers")
    if isinstance(workers, int) and workers > 1:
        lg.put("engines.reward.workers", workers, f"{RM}.num_workers")
    generative = lg.value(f"{RM}.rollout.name")
    if generative not in (None, "???"):
        lg.conflict(f"{RM}.rollout.name", f"{generative!r}: a generative reward model on its own "
                    "server; rlctl's llm_judge asks the policy's rollout engine instead",
                    "keep this run on verl, or remove the generative reward model")
    lg.drop_tree(f"{RM}.rollout", "verl's generative reward-model server (not used)")
    lg.drop_tree(f"{RM}.megatron", "the reward model's parallel layout: rlctl runs it whole")
    lg.drop_tree(f"{RM}.fsdp_config", "the reward model's sharding: rlctl runs it whole")
    lg.notes.append(f"{RM}.enable: verl returns the reward model's score alone (its reward "
                    "managers skip the rule reward); the recipe scores with reward_model only, "
                    "add a rule reward to [[rewards]] to mix them")
    return {"name": "reward_model", "options": options}
