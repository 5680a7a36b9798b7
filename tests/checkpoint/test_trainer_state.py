"""RNG capture/restore round trip and the JSON trainer state."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from rlctl.checkpoint import TrainerState, capture_rng_state, restore_rng_state


def draw() -> tuple[list[float], list[float], list[float], float]:
    return (
        [random.random() for _ in range(3)],
        np.random.rand(3).tolist(),
        torch.rand(3).tolist(),
        random.gauss(0, 1),
    )


def test_rng_round_trip_through_json() -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leave a cached gaussian in Python's state
    np.random.randn()
    state = json.loads(json.dumps(capture_rng_state()))  # must survive JSON unchanged
    expected = draw()
    draw()  # move every generator on
    restore_rng_state(state)
    assert draw() == expected


def test_restored_state_differs_from_a_fresh_seed() -> None:
    torch.manual_seed(0)
    torch.rand(5)
    state = capture_rng_state()
    after = torch.rand(3).tolist()
    torch.manual_seed(0)
    assert torch.rand(3).tolist() != after  # the saved state is not just the seed
    restore_rng_state(state)
    assert torch.rand(3).tolist() == after


def test_rng_state_version_is_checked() -> None:
    state = capture_rng_state()
    state["version"] = 99
    with pytest.raises(ValueError, match="RNG state version 99"):
        restore_rng_state(state)


def test_trainer_state_round_trip(tmp_path: Path) -> None:
    state = TrainerState(
        step=12,
        policy_version=12,
        dataloader={"epoch": 1, "position": 40, "seed": 0},
        kl_controller={"coef": 0.0012345678901234567},
        rng=capture_rng_state(),
        config_fingerprint="abc123",
        extra={"plugin": [1, 2]},
    )
    path = state.save(tmp_path)
    assert path.name == "trainer_state.json"
    loaded = TrainerState.load(tmp_path)
    assert loaded == state
    assert loaded.kl_controller["coef"] == 0.0012345678901234567  # floats survive exactly


def test_trainer_state_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="TrainerState.dataloader is not JSON-able"):
        TrainerState(step=1, dataloader={"gen": np.random.default_rng(0)}).save(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a trainer checkpoint"):
        TrainerState.load(tmp_path / "nowhere")
    (tmp_path / "trainer_state.json").write_text(
        json.dumps({"format_version": 1, "step": 1, "bogus": 2})
    )
    with pytest.raises(ValueError, match=r"unknown fields \['bogus'\]"):
        TrainerState.load(tmp_path)
