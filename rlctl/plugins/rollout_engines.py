"""Built-in rollout engines: ``hf`` (transformers generate), ``vllm`` and ``sglang`` (server
mode)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rlctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from rlctl.config.problems import ConfigProblem
    from rlctl.config.recipe import Recipe

SERVER_ENGINES = ("vllm", "sglang")


@hookimpl
def register_rollout_engines(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.engines.rollout.hf.options import HFRolloutOptions
    from rlctl.engines.rollout.sglang.options import SGLangOptions
    from rlctl.engines.rollout.vllm.options import VLLMOptions

    register(
        "hf",
        "rlctl.engines.rollout.hf.engine:HFRolloutEngine",
        options=HFRolloutOptions,
        description="transformers generate with sampling, in-process (CPU / small models)",
        weight_sync="in_process",
    )
    register(
        "vllm",
        "rlctl.engines.rollout.vllm.engine:VLLMRolloutEngine",
        options=VLLMOptions,
        description="vLLM OpenAI-compatible server(s), token-in/token-out over HTTP",
        weight_sync="vllm",
        partial_rollout=True,  # aborts and resumes requests at a weight update
        json_schema=True,  # constrained decoding: SamplingParams.json_schema
        memory_release=True,  # sleep mode while training runs (colocated, CUDA)
    )
    register(
        "sglang",
        "rlctl.engines.rollout.sglang.engine:SGLangRolloutEngine",
        options=SGLangOptions,
        description="SGLang server(s), token-in/token-out over the native /generate",
        weight_sync="sglang",
        partial_rollout=True,  # aborts and resumes requests at a weight update
        memory_release=True,  # the memory saver while training runs (colocated, CUDA)
    )


@hookimpl
def validate_config(recipe: Recipe) -> list[ConfigProblem]:
    """A server engine's ``python`` must exist on this machine and be executable, and it must
    load the run's LoRA adapters when the sync moves only them."""
    return _interpreter_problems(recipe) + _adapter_problems(recipe)


def _adapter_problems(recipe: Recipe) -> list[ConfigProblem]:
    """SGLang's CPU build loads no adapters; vLLM's largest adapter rank is 512. (With
    ``run.device = "auto"`` the SGLang engine itself refuses on a machine without CUDA.)"""
    from rlctl.engines.rollout.contract import adapter_sync_of

    lora, backend = adapter_sync_of(recipe), recipe.engines.rollout.backend
    if lora is None or backend not in SERVER_ENGINES:
        return []
    from rlctl.config.lora_checks import MERGED
    from rlctl.config.problems import ConfigProblem

    if lora.trainable_modules:
        return [ConfigProblem(
            "engines.rollout.lora_sync", f'lora_sync = "adapter" with the {backend} engine, but '
            f"model.lora.trainable_modules ({', '.join(lora.trainable_modules)}) train in full, "
            "and vLLM and SGLang load LoRA matrices only with an adapter",
            f"{MERGED}, or remove model.lora.trainable_modules")]
    if backend == "sglang" and recipe.run.device == "cpu":
        from rlctl.engines.rollout.sglang.server import CPU_NO_ADAPTERS

        return [ConfigProblem("engines.rollout.lora_sync", f'lora_sync = "adapter" on CPU '
                              f"(run.device = \"cpu\"): {CPU_NO_ADAPTERS}",
                              f"{MERGED}, or run SGLang on CUDA")]
    if backend == "vllm":
        from rlctl.engines.rollout.vllm.server import LORA_RANKS, max_lora_rank

        if max_lora_rank(lora.rank) is None:
            return [ConfigProblem("model.lora.rank", f"vLLM loads adapters of rank at most "
                                  f"{LORA_RANKS[-1]}, and rank = {lora.rank}",
                                  f"use a rank <= {LORA_RANKS[-1]}, or {MERGED[4:]}")]
    return []


def _interpreter_problems(recipe: Recipe) -> list[ConfigProblem]:
    """(The interpreter's form, an absolute path, is the option model's check; a relative one
    is reported there, so it is skipped here.)"""
    rollout = recipe.engines.rollout
    python = rollout.options.get("python") if rollout.backend in SERVER_ENGINES else None
    if not isinstance(python, str) or not os.path.isabs(python):
        return []
    from rlctl.config.problems import ConfigProblem
    from rlctl.engines.rollout.server.options import INTERPRETER_FIX, interpreter_problem

    problem = interpreter_problem(python)
    if problem is None:
        return []
    return [ConfigProblem("engines.rollout.options.python", problem, INTERPRETER_FIX)]
