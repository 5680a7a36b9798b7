"""Config fingerprint and diff: resuming with a config that changes the math is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.checkpoint import (
    IncompatibleConfigError,
    check_resume_compatible,
    config_fingerprint,
    diff_configs,
    load_config_snapshot,
    save_config_snapshot,
)
from rlctl.config.recipe import (
    AlgorithmSection,
    EnginesSection,
    LossSection,
    Recipe,
    RewardSection,
    ScheduleSection,
    TrainEngineSection,
)

BASE = Recipe(rewards=[RewardSection(name="digits_match")])


def test_diff_lists_nested_key_paths() -> None:
    old = {"a": {"b": 1, "c": [1, 2]}, "d": "x", "gone": 1}
    new = {"a": {"b": 2, "c": [1, 3, 4]}, "d": "x", "added": True}
    assert diff_configs(old, new, ignore=()) == ["a.b", "a.c[1]", "a.c[2]", "added", "gone"]
    assert diff_configs(old, old, ignore=()) == []
    assert diff_configs({"n": 1}, {"n": 1.0}, ignore=()) == []  # TOML may spell a number either way


def test_execution_sections_may_change_on_resume() -> None:
    new = BASE.model_copy(
        update={
            "engines": EnginesSection(train=TrainEngineSection(ranks=2, micro_batch_size=2)),
            "schedule": ScheduleSection(total_steps=500),
        }
    )
    assert diff_configs(BASE, new) == []
    assert config_fingerprint(BASE) == config_fingerprint(new)
    assert diff_configs(BASE, new, ignore=()) == [
        "engines.train.micro_batch_size",
        "engines.train.ranks",
        "schedule.total_steps",
    ]
    assert config_fingerprint(BASE, ignore=()) != config_fingerprint(new, ignore=())


def test_a_changed_algorithm_is_refused_with_the_keys_listed() -> None:
    new = BASE.model_copy(
        update={
            "algorithm": AlgorithmSection(estimator="rloo", loss=LossSection(clip_high=0.28)),
            "rewards": [RewardSection(name="digits_match", weight=0.5)],
        }
    )
    assert config_fingerprint(BASE) != config_fingerprint(new)
    with pytest.raises(IncompatibleConfigError) as info:
        check_resume_compatible(BASE, new)
    assert info.value.differences == [
        "algorithm.estimator",
        "algorithm.loss.clip_high",
        "rewards[0].weight",
    ]
    message = str(info.value)
    assert '  algorithm.estimator: "grpo" -> "rloo"' in message
    assert "  algorithm.loss.clip_high: 0.2 -> 0.28" in message
    assert "  rewards[0].weight: 1.0 -> 0.5" in message
    assert check_resume_compatible(BASE, new, force=True) == info.value.differences


def test_fingerprint_is_stable_and_order_independent() -> None:
    a = {"x": {"p": Path("/data/train.parquet"), "q": (1, 2)}, "y": 1}
    b = {"y": 1, "x": {"q": [1, 2], "p": "/data/train.parquet"}}
    assert config_fingerprint(a, ignore=()) == config_fingerprint(b, ignore=())
    assert len(config_fingerprint(a)) == 16


def test_config_snapshot_round_trip(tmp_path: Path) -> None:
    save_config_snapshot(tmp_path, BASE)
    snapshot = load_config_snapshot(tmp_path)
    assert snapshot["algorithm"]["kl"]["in"] == "none"  # written by alias, like the recipe
    assert diff_configs(snapshot, BASE, ignore=()) == []
