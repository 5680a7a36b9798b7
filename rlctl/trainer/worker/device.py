"""Choosing the device of a run (``run.device``)."""

from __future__ import annotations

from rlctl.config.recipe import Recipe


def pick_device(recipe: Recipe) -> str:
    if recipe.run.device != "auto":
        return recipe.run.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
