"""The recipe checks of LoRA (``[model.lora]``, ``[engines.rollout] lora_sync``): what engines
and weight syncs can do, from their registration metadata (``lora`` on a training engine,
``adapters`` on a weight sync). What a server engine can load is its plugin's check
(:mod:`rlctl.plugins.rollout_engines`)."""

from __future__ import annotations

from rlctl.config.plugin_options import weight_sync_name
from rlctl.config.problems import ConfigProblem
from rlctl.config.recipe import Recipe
from rlctl.registry import Registry

MERGED = 'set [engines.rollout] lora_sync = "merged" (full weights, the adapters merged in)'


def lora_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    """Every LoRA problem of ``recipe``."""
    lora, rollout = recipe.model.lora, recipe.engines.rollout
    if not lora.enabled:
        if rollout.lora_sync != "adapter":  # not the default: set on purpose
            return [ConfigProblem(
                "engines.rollout.lora_sync", "lora_sync says how LoRA adapters reach the "
                "rollout engine, but [model.lora] rank = 0 (LoRA off: the full weights move)",
                "set [model.lora] rank > 0 to train adapters, or remove lora_sync")]
        return []
    return _engine_problems(recipe, registry) + _sync_problems(recipe, registry)


def _engine_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    backend = recipe.engines.train.backend
    engine = registry.find("model_engine", backend)
    if engine is None or engine.metadata.get("lora", False):
        return []  # an unknown engine is the problem reported by check_selections
    able = sorted(e.name for e in registry.all("model_engine") if e.metadata.get("lora", False))
    return [ConfigProblem(
        "model.lora.rank", f"[model.lora] trains LoRA adapters, but the {backend!r} training "
        "engine has no LoRA path: it trains every weight (only engines registered with "
        "lora=True train adapters)",
        f"use engines.train.backend = one of {able}, or set [model.lora] rank = 0")]


def _sync_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    if recipe.engines.rollout.lora_sync != "adapter":
        return []
    name = weight_sync_name(recipe, registry)
    sync = registry.find("weight_sync", name) if name is not None else None
    if sync is None or sync.metadata.get("adapters", False):
        return []  # an unknown sync is the problem reported by check_selections
    return [ConfigProblem(
        "engines.rollout.lora_sync", f'lora_sync = "adapter" moves only the LoRA adapters, '
        f"and the {name!r} weight sync cannot load adapters into an engine (it moves full "
        "weights)", MERGED)]
