"""verl -> rlctl for a discriminative reward model (``reward_model.enable``).

verl scores every response with the checkpoint at ``reward_model.model.path`` and its reward
managers then return that score alone (``rm_scores``): the rule reward is not added. The
migrated recipe therefore has one ``[[rewards]] name = "reward_model"``; rlctl's reward worker
reads the policy's own tokens, which is what verl does with ``model.input_tokenizer = null``
(verl's default re-renders each sample with the reward model's chat template instead).
"""

from __future__ import annotations

from typing import Any

from rlctl.migrate.ledger import Ledger

RM = "reward_model"
LAYOUT = "placement of verl's reward-model workers: rlctl's run in [engines.reward]"


def translate_reward_model(lg: Ledger) -> dict[str, Any] | None:
    """The ``[[rewards]]`` entry of the reward model, or None when it is off (or refused)."""
    if not lg.value(f"{RM}.enable"):
        lg.drop(f"{RM}.enable", "at False (off): no reward model")
        return None
    lg.take(f"{RM}.enable", "rewards")
    tokenizer = lg.value(f"{RM}.model.input_tokenizer")
    if tokenizer is not None:
        lg.error(f"{RM}.model.input_tokenizer", f"{tokenizer!r}: verl decodes each response and "
                 "re-renders it with the reward model's chat template; rlctl's reward model "
                 "reads the policy's own tokens", f"set {RM}.model.input_tokenizer=null when the "
                 "reward model shares the policy's tokenizer and chat template")
    else:
        lg.drop(f"{RM}.model.input_tokenizer", "null: the reward model reads the policy's tokens")
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
        lg.error(f"{RM}.rollout.name", f"{generative!r}: a generative reward model on its own "
                 "server; rlctl's llm_judge asks the policy's rollout engine instead",
                 "keep this run on verl, or remove the generative reward model")
    lg.drop_tree(f"{RM}.rollout", "verl's generative reward-model server (not used)")
    lg.drop_tree(f"{RM}.megatron", "the reward model's parallel layout: rlctl runs it whole")
    lg.drop_tree(f"{RM}.fsdp_config", "the reward model's sharding: rlctl runs it whole")
    lg.notes.append(f"{RM}.enable: verl returns the reward model's score alone (its reward "
                    "managers skip the rule reward); the recipe scores with reward_model only, "
                    "add a rule reward to [[rewards]] to mix them")
    return {"name": "reward_model", "options": options}
