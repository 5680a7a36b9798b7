"""Whole training steps with the multi-turn loops: local mode, real engines, memory plane."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.run.entry import Run


def run(tmp_path: Path, model: dict | None = None, rewards: list | None = None, steps: int = 2,
        **rollout) -> tuple[list[dict], Path]:
    recipe = Recipe.model_validate(
        {
            "run": {"name": "a", "seed": 0, "output_dir": str(tmp_path), "device": "cpu"},
            "model": model or {"path": "tiny", "dtype": "float32"},
            "data": {"task": rollout.pop("task")},
            **({"rewards": rewards} if rewards else {}),
            "algorithm": {"prompts_per_step": 16, "group_size": 4, "optim": {"lr": 3e-3}},
            "rollout": {"temperature": 1.0, **rollout},
            "engines": {"train": {"ranks": 1, "micro_batch_size": 64}},
            "data_plane": {"backend": "memory"},
            "resources": {"mode": "local"},
            "schedule": {"total_steps": steps},
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


def agent_run(tmp_path: Path, agent: str, steps: int = 2,
              positions: int = 256) -> tuple[list[dict], Path]:
    return run(
        tmp_path,
        model={"path": "tiny-chat", "dtype": "float32",
               "tiny": {"max_position_embeddings": positions}},
        rewards=[{"name": "agent_reward"}],
        steps=steps,
        task="count_digits",
        agent_loop="openai_agent",
        max_new_tokens=3,
        agent_loop_options={"agent": agent},
    )


def test_an_agent_that_raises_scores_its_episode_zero_and_the_run_goes_on(tmp_path, caplog):
    rows, out = agent_run(tmp_path, "tests.agents.agent_functions:flaky")
    # session 1 of each group of 4 raised: a quarter of the episodes, scored 0, counted
    assert [r["agent/episode_errors"] for r in rows] == [0.25, 0.25]
    for row in rows:
        assert row["training/rollout_probs_diff"] < 1e-4
    dumped = [json.loads(x) for x in (out / "rollouts" / "step_2.jsonl").read_text().splitlines()]
    failed = [d for d in dumped if "episode_error" in d]
    assert failed and all(d["reward"] == 0.0 for d in failed)
    assert all("unknown tool 'search'" in d["episode_error"] for d in failed)
    assert all(d["reward"] > 0 for d in dumped if "episode_error" not in d)
    warned = [r.getMessage() for r in caplog.records if "scored 0" in r.getMessage()]
    assert warned and all("\n" not in m for m in warned)


def test_a_step_where_a_framework_failed_every_episode_still_trains(tmp_path):
    pytest.importorskip("pydantic_ai")
    # pydantic-ai asked for an int forces its output tool's call, which 3 tokens of a
    # random model never finish: it raises in every episode
    rows, out = agent_run(tmp_path, "tests.agents.framework_agents:pydantic_ai_typed", steps=1,
                          positions=512)
    assert rows[0]["agent/episode_errors"] == 1.0 and rows[0]["critic/score/mean"] == 0.0
    dumped = [json.loads(x) for x in (out / "rollouts" / "step_1.jsonl").read_text().splitlines()]
    # it stops on its token limit, or retries until the conversation outgrows the model
    kinds = {d["episode_error"].split(":")[0] for d in dumped}
    assert kinds <= {"OutputTokenLimitExceeded", "ModelRequestRejectedError"}, kinds
    # the forced opening is an observation, the model's tokens are trained on (score 0)
    assert all(d["segments"][0] == ["obs", "<tool_call>\n"] for d in dumped), dumped[0]


@pytest.mark.slow
def test_the_openai_agent_recipe_trains_its_example_agent(tmp_path):
    from rlctl.config.pipeline import load_recipe

    pytest.importorskip("rlctl_agent_example", reason="pip install -e examples/rlctl-agent-example")
    loaded = load_recipe(
        [Path("recipes/tiny_openai_agent_grpo.toml").resolve()],
        [f"run.output_dir={tmp_path}", "schedule.total_steps=2", "algorithm.prompts_per_step=8",
         "algorithm.group_size=4", "engines.train.micro_batch_size=32",
         "engines.train.log_prob_micro_batch_size=32", 'logging.sinks=["jsonl"]',
         "logging.progress=false"], {})
    Run(loaded, quiet=True).execute()
    rows = [json.loads(x) for x in
            (tmp_path / "tiny-openai-agent-grpo" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["agent/turns"] >= 1 for row in rows)
    assert all(row["training/rollout_probs_diff"] < 1e-4 for row in rows)
