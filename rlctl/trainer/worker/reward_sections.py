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


def reward_fields(recipe: Recipe, registry: Any) -> list[str]:
    """The data-plane fields logged per reward: ``reward/<name>`` of each, and
    ``reward/overlong`` when DAPO's overlong punishment is on."""
    fields = [f"reward/{r.name}" for r in effective_rewards(recipe, registry)]
    if recipe.algorithm.overlong.buffer_len:
        fields.append("reward/overlong")
    return list(dict.fromkeys(fields))
