"""The rewards a run scores with: the recipe's ``[[rewards]]``, or its task's default reward."""

from __future__ import annotations

from typing import Any

from rlctl.config.recipe import Recipe, RewardSection


def effective_rewards(recipe: Recipe, registry: Any) -> list[RewardSection]:
    if recipe.rewards:
        return list(recipe.rewards)
    if recipe.data.task is not None:
        default = registry.get("task", recipe.data.task).metadata.get("reward")
        if default:
            return [RewardSection(name=default)]
    raise ValueError("no rewards: add a [[rewards]] table to the recipe")
