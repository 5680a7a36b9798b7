"""Helpers for trainer tests: tiny recipes built in code, runs in temporary directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rlctl.config.recipe import Recipe


def deep_update(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_update(out[key], value)
        else:
            out[key] = value
    return out


def tiny_recipe(tmp_path: Path, **patch: Any) -> Recipe:
    """A small, fast local-mode GRPO recipe on the count_digits task."""
    base: dict[str, Any] = {
        "run": {"name": "t", "seed": 0, "output_dir": str(tmp_path / "runs"), "device": "cpu"},
        "model": {"path": "tiny", "dtype": "float32"},
        "data": {"task": "count_digits"},
        "algorithm": {
            "estimator": "grpo",
            "prompts_per_step": 8,
            "group_size": 4,
            "optim": {"lr": 3e-3},
        },
        "rollout": {"max_new_tokens": 3, "temperature": 1.0},
        "rewards": [{"name": "digits_match"}],
        "engines": {"train": {"backend": "fsdp", "ranks": 1, "micro_batch_size": 16}},
        "data_plane": {"backend": "memory"},
        "resources": {"mode": "local"},
        "schedule": {"total_steps": 3},
        "logging": {"sinks": ["jsonl"], "progress": False},
    }
    return Recipe.model_validate(deep_update(base, patch))


def read_metrics(recipe: Recipe) -> list[dict[str, Any]]:
    path = Path(recipe.run.output_dir) / recipe.run.name / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def make_recipe(tmp_path):
    def make(**patch: Any) -> Recipe:
        return tiny_recipe(tmp_path, **patch)

    return make


@pytest.fixture(name="read_metrics")
def read_metrics_fixture():
    return read_metrics


@pytest.fixture
def run():
    """``run(recipe)``: train it in this process (the recipe says local mode); its metric rows."""
    from rlctl.config.pipeline import validate_recipe
    from rlctl.run.entry import Run

    def _run(recipe: Recipe) -> list[dict[str, Any]]:
        Run(validate_recipe(recipe), quiet=True).execute()
        return read_metrics(recipe)

    return _run
