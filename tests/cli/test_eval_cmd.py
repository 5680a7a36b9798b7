"""``rlctl eval``: the held-out prompts of a recipe through a rollout engine, scored by its rule
rewards: pass@1 greedy, mean@k / pass@k sampled, as a table and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TINY = """
[run]
device = "cpu"
output_dir = "{out}"
[model]
path = "tiny"
dtype = "float32"
[data]
task = "count_digits"
val_size = 6
[rollout]
max_new_tokens = 3
[[rewards]]
name = "digits_match"
[engines.rollout]
backend = "hf"
"""


@pytest.fixture
def recipe(tmp_path) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(out=tmp_path / "runs"))
    return path


def test_json_has_greedy_pass_at_1_and_sampled_mean_and_pass_at_k(recipe, tmp_path, rlctl) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "eval.json"
    result = json.loads(rlctl("eval", str(recipe), "--k", "3", "--json", "--out",
                              str(out)).stdout)
    assert json.loads(out.read_text()) == result
    assert result["model"] == "tiny" and result["prompts"] == 6 and result["backend"] == "hf"
    greedy, sampled = result["passes"]
    assert (greedy["name"], greedy["responses_per_prompt"], greedy["temperature"]) == (
        "greedy", 1, 0.0)
    assert (sampled["name"], sampled["responses_per_prompt"], sampled["temperature"]) == (
        "sampled", 3, 1.0)
    for metrics, names in ((greedy["metrics"], ["pass@1"]),
                           (sampled["metrics"], ["mean@3", "pass@3"])):
        for name in names:
            assert 0.0 <= metrics[f"{name}/ci_low"] <= metrics[name] <= metrics[f"{name}/ci_high"]
    assert sampled["metrics"]["pass@3"] >= sampled["metrics"]["mean@3"]
    assert 0 < greedy["generated_tokens"] <= 6 * 3 and len(result["examples"]) == 3


def test_the_same_model_scores_the_same_on_every_run(recipe, rlctl) -> None:  # type: ignore[no-untyped-def]
    first = json.loads(rlctl("eval", str(recipe), "--json").stdout)
    again = json.loads(rlctl("eval", str(recipe), "--json").stdout)
    assert first["passes"][0]["metrics"] == again["passes"][0]["metrics"]
    assert first["examples"] == again["examples"]


def test_the_table_names_each_metric_with_its_interval(recipe, rlctl) -> None:  # type: ignore[no-untyped-def]
    lines = rlctl("eval", str(recipe), "--k", "2").stdout.splitlines()
    assert lines[0] == "tiny on count_digits: 6 held-out prompts, hf engine"
    assert lines[2].startswith("pass@1 (greedy)") and lines[3].startswith("mean@2 (t=1)")
    assert lines[4].startswith("pass@2 (t=1)") and "[" in lines[2]


def test_bad_requests_are_usage_errors_with_nothing_written(recipe, tmp_path, rlctl) -> None:  # type: ignore[no-untyped-def]
    taken = tmp_path / "taken.json"
    taken.write_text("mine")
    out = rlctl("eval", str(recipe), "--out", str(taken), code=2)
    assert "exists" in out.stderr and taken.read_text() == "mine"
    out = rlctl("eval", str(recipe), "--k", "2", "--temperature", "0", code=2)
    assert "would be identical" in out.stderr
    out = rlctl("eval", str(recipe), "--model", str(tmp_path / "nowhere"), code=2)
    assert "--model" in out.stderr and "catalog name" in out.stderr
    out = rlctl("eval", str(recipe), "-s", 'rollout.agent_loop="tool"', code=2)
    assert "single-turn" in out.stderr or "tool" in out.stderr


def test_a_checkpoint_is_exported_and_scored(recipe, tmp_path, rlctl) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs"
    # one small step (8 prompts x 4, not the default 64 x 8): a checkpoint to score is the point
    rlctl("train", str(recipe), "--local", "--quiet", "-s", "schedule.total_steps=1",
          "-s", "schedule.save_every=1", "-s", "data_plane.backend=memory",
          "-s", "algorithm.prompts_per_step=8", "-s", "algorithm.group_size=4",
          "-s", 'run.name="ck"')
    checkpoint = next((runs / "ck" / "checkpoints").glob("step_*"))
    result = json.loads(rlctl("eval", str(recipe), "--model", str(checkpoint), "--json").stdout)
    assert result["model"] == str(checkpoint) and result["passes"][0]["metrics"]["pass@1"] >= 0
    # a run directory means its final export
    by_run = json.loads(rlctl("eval", str(recipe), "--model", str(runs / "ck"), "--json").stdout)
    assert by_run["passes"][0]["metrics"] == result["passes"][0]["metrics"]
