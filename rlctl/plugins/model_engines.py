"""Built-in model (training) engines: ``fsdp`` (FSDP2) and ``megatron`` (Megatron-core)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from rlctl.config.problems import ConfigProblem
    from rlctl.config.recipe import Recipe

TOKEN_BUDGETS = ("max_tokens_per_micro_batch", "log_prob_max_tokens_per_micro_batch")


@hookimpl
def register_model_engines(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.engines.train.fsdp.options import FSDPOptions
    from rlctl.engines.train.megatron.options import MegatronOptions

    register(
        "fsdp",
        "rlctl.engines.train.fsdp.engine:FSDPEngine",
        options=FSDPOptions,
        description="torch FSDP2 (fully_shard): gloo on CPU, NCCL on GPU; actor, ref and critic",
        lora=True,  # trains [model.lora] adapters (peft) instead of every weight
    )
    register(
        "megatron",
        "rlctl.engines.train.megatron.engine:MegatronEngine",
        options=MegatronOptions,
        description="Megatron-core TP/PP/DP (pip install megatron-core==0.16.1); actor, ref, "
                    "critic; every weight trains (no LoRA)",
    )


@hookimpl
def validate_config(recipe: Recipe) -> list[ConfigProblem]:
    """An ``fsdp`` token budget must hold the longest sample the recipe allows (a prompt of
    ``data.max_prompt_tokens`` plus ``rollout.max_new_tokens``): a micro-batch cannot split a
    sample. (Types and signs are the option model's check; other values are skipped here.)"""
    from rlctl.config.problems import ConfigProblem

    train = recipe.engines.train
    if train.backend != "fsdp":
        return []
    longest = recipe.data.max_prompt_tokens + recipe.rollout.max_new_tokens
    problems = []
    for key in TOKEN_BUDGETS:
        budget = train.options.get(key)
        if isinstance(budget, int) and not isinstance(budget, bool) and 0 < budget < longest:
            problems.append(ConfigProblem(
                f"engines.train.options.{key}",
                f"a token budget of {budget} cannot hold the longest sample this recipe allows: "
                f"{longest} tokens (data.max_prompt_tokens {recipe.data.max_prompt_tokens} + "
                f"rollout.max_new_tokens {recipe.rollout.max_new_tokens}); a micro-batch "
                "never splits a sample",
                f"set engines.train.options.{key} to at least {longest}, or lower "
                "data.max_prompt_tokens or rollout.max_new_tokens",
            ))
    return problems
