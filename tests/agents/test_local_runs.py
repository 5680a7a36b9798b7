"""Whole training steps with the multi-turn loops: local mode, real engines, memory plane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.run.entry import Run


def run(tmp_path: Path, **rollout) -> tuple[list[dict], Path]:
    recipe = Recipe.model_validate(
        {
            "run": {"name": "a", "seed": 0, "output_dir": str(tmp_path), "device": "cpu"},
            "model": {"path": "tiny", "dtype": "float32"},
            "data": {"task": rollout.pop("task")},
            "algorithm": {"prompts_per_step": 16, "group_size": 4, "optim": {"lr": 3e-3}},
            "rollout": {"temperature": 1.0, **rollout},
            "engines": {"train": {"ranks": 1, "micro_batch_size": 64}},
            "data_plane": {"backend": "memory"},
            "resources": {"mode": "local"},
            "schedule": {"total_steps": 2},
            "logging": {"sinks": ["jsonl"], "progress": False, "rollout_dump_samples": 64},
        }
    )
    Run(validate_recipe(recipe), quiet=True).execute()
    out = tmp_path / "a"
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()], out


@pytest.mark.parametrize("loop", ["tool", "env"])
def test_multi_turn_steps_train_on_generated_tokens_only(tmp_path, loop):
    if loop == "tool":
        rows, out = run(
            tmp_path,
            task="tool_secret",
            agent_loop="tool",
            tool_parser="compact",
            tools=[{"name": "lookup"}],
            max_new_tokens=3,
            agent_loop_options={"max_turns": 3, "max_total_tokens": 10},
        )
    else:
        rows, out = run(
            tmp_path,
            task="guess_digit",
            agent_loop="env",
            max_new_tokens=2,
            environment={"name": "guess_digit", "options": {"end_on_invalid": False}},
            agent_loop_options={"max_turns": 3},
        )
    dumped = [json.loads(x) for x in (out / "rollouts" / "step_2.jsonl").read_text().splitlines()]
    observed = [s for d in dumped for s in d["segments"] if s[0] == "obs"]
    assert observed, "no multi-turn sample in the step"
    for d in dumped:  # the trajectory is its segments, in order
        assert "".join(text for _, text in d["segments"]) == d["response"]
    for row in rows:
        # the trainer's log-probs of generated tokens match the engine's: observation tokens
        # (stored with log-prob 0.0) are masked out, or this would be far from 0
        assert row["training/rollout_probs_diff"] < 1e-4
        assert row["response_length/max"] <= (3 if loop == "tool" else 2) * 3
    # response_length counts generated tokens: below the mean length with observations
    mean_len = sum(d["response_len"] for d in dumped) / len(dumped)
    assert rows[-1]["response_length/mean"] < mean_len
    assert rows[-1]["agent/turns" if loop == "tool" else "agent/env_steps"] >= 1
