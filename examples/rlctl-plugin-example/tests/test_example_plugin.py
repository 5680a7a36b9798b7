"""Tests of the example plugin: its implementations and its integration with rlctl."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from rlctl_plugin_example.estimators import median_baseline_advantage
from rlctl_plugin_example.rewards import numeric_closeness

from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError
from rlctl.registry import build_registry
from rlctl.rewards.base import RewardInput

HERE = Path(__file__).resolve().parents[1]
RECIPES = HERE.parents[1] / "recipes"


def _sample(text: str, answer: str) -> RewardInput:
    return RewardInput(
        prompt_text="12345=", response_text=text, response_ids=(), ground_truth={
            "ground_truth": answer}, data_source="count_digits")


@pytest.mark.parametrize(
    ("text", "answer", "tolerance", "score"),
    [("5", "5", 2.0, 1.0), ("6", "5", 2.0, 0.5), ("9 apples", "5", 2.0, 0.0),
     ("x 4.5 y", "5", 1.0, 0.5)],
)
def test_numeric_closeness_scores(text: str, answer: str, tolerance: float, score: float) -> None:
    out = numeric_closeness(_sample(text, answer), tolerance=tolerance)
    assert out == {"score": pytest.approx(score), "parsed": 1.0}


def test_numeric_closeness_without_a_number_gives_missing_score() -> None:
    assert numeric_closeness(_sample("none", "5"), missing_score=-0.5) == {
        "score": -0.5, "parsed": 0.0}


def test_median_baseline_by_hand() -> None:
    # two groups: scores [1, 0, 0, 5] (median 0.5) and [2, 4] (median 3); T = 2 tokens
    rewards = torch.tensor([[0, 1.0], [0, 0], [0, 0], [2, 3], [0, 2], [4, 0]])
    mask = torch.tensor([[1, 1], [1, 1], [1, 0], [1, 1], [1, 1], [1, 1]], dtype=torch.float32)
    adv, ret = median_baseline_advantage(rewards, mask, ["a", "a", "a", "a", "b", "b"])
    expected = torch.tensor([0.5, -0.5, -0.5, 4.5, -1.0, 1.0])
    assert torch.allclose(adv, expected[:, None] * mask)
    assert torch.equal(adv, ret)


def test_median_baseline_mad_scaling() -> None:
    rewards = torch.tensor([[1.0], [2.0], [4.0]])
    mask = torch.ones(3, 1)
    adv, _ = median_baseline_advantage(rewards, mask, [0, 0, 0], scale="mad", epsilon=0.0)
    # median 2, absolute deviations [1, 0, 2] -> MAD 1
    assert torch.allclose(adv[:, 0], torch.tensor([-1.0, 0.0, 2.0]))


def test_registered_through_the_entry_point() -> None:
    registry = build_registry(external="example")
    reward = registry.get("reward_function", "numeric_closeness")
    estimator = registry.get("advantage_estimator", "median_baseline")
    assert reward.plugin.distribution == "rlctl-plugin-example"
    assert estimator.metadata["group_based"] is True
    assert estimator.load() is median_baseline_advantage
    assert not registry.failures


def test_recipe_selecting_the_plugin_validates() -> None:
    registry = build_registry(external="example")
    loaded = load_recipe([RECIPES / "tiny_grpo.toml", HERE / "recipe.toml"], env={},
                         registry=registry)
    assert loaded.recipe.algorithm.estimator == "median_baseline"
    assert loaded.options_for("rewards[0].options").tolerance == 3.0


def test_options_are_checked_by_the_plugin_model() -> None:
    registry = build_registry(external="example")
    with pytest.raises(ConfigError) as err:
        load_recipe([RECIPES / "tiny_grpo.toml", HERE / "recipe.toml"],
                    ["rewards.0.options.tolerence=1", "algorithm.estimator_options.scale=std"],
                    env={}, registry=registry)
    paths = {p.path for p in err.value.problems}
    assert paths == {"rewards[0].options.tolerence", "algorithm.estimator_options.scale"}


def test_validate_config_hook_reports_small_groups() -> None:
    registry = build_registry(external="example")
    with pytest.raises(ConfigError) as err:
        load_recipe([RECIPES / "tiny_grpo.toml", HERE / "recipe.toml"],
                    ["algorithm.group_size=2"], env={}, registry=registry)
    by_path = {p.path: p.message for p in err.value.problems}
    assert "at least 3" in by_path["algorithm.group_size"]


def test_loading_the_plugin_module_imports_no_pydantic() -> None:
    # rlctl loads this module for `rlctl --help` and `plugins list`: what it imports at load
    # time every command pays (pydantic alone was ~150 ms of a 0.2 s `--help`).
    import subprocess
    import sys

    probe = ("import sys, rlctl_plugin_example.plugin; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pydantic', 'pydantic_core', 'torch')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == "[]", out
