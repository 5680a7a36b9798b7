"""`rlctl train` end to end in Ray mode (2 FSDP ranks, a rollout actor, real data planes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.cli_runs import SMALL_STEPS, overrides
from tests.trainer.metric_rows import deterministic

REPO = Path(__file__).resolve().parents[2]


def _train(tmp_path: Path, name: str, *overrides: str, timeout: int = 600) -> list[dict]:
    cmd = [
        sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_grpo.toml"), "--quiet",
        "-s", f'run.output_dir="{tmp_path}"', "-s", f'run.name="{name}"', *overrides,
    ]
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


@pytest.mark.slow
def test_tiny_grpo_learns_in_ray_mode(tmp_path):
    """A shortened tiny_grpo (the CPU default): the reward must clearly rise."""
    rows = _train(tmp_path, "short", "-s", "schedule.total_steps=50")
    scores = [r["critic/score/mean"] for r in rows]
    first3 = sum(scores[:3]) / 3
    last10 = sum(scores[-10:]) / 10
    assert len(rows) == 50
    assert last10 >= 3 * first3 and last10 >= 0.1, (first3, last10)
    # metadata only through the controller: a few hundred bytes per sample, not tokens
    assert rows[-1]["perf/controller_bytes_per_sample"] <= 1024
    assert (tmp_path / "short" / "hf" / "model.safetensors").is_file()


# The comparisons below hold runs of the same small steps against each other: the same
# metadata, the same numbers whatever the phase split or the data plane, at any batch size.
THREE_SMALL = overrides("schedule.total_steps=3", *SMALL_STEPS)


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory) -> list[dict]:
    """tiny_grpo for 3 small steps in Ray mode (2 FSDP ranks, the ray data plane): the run the
    comparisons below hold others against (one Ray start for all of them)."""
    return _train(tmp_path_factory.mktemp("ray3"), "ray", *THREE_SMALL)


@pytest.mark.slow
def test_controller_bytes_per_sample_mean_the_same_in_both_modes(tmp_path, three_steps):
    """Same recipe, same definition: Ray mode (2 ranks) and --local (1 rank) meter the same
    metadata; the weights are a reference in both. Ray mode sends the per-rank arguments and
    collects the per-rank results twice, hence the tolerance."""
    local_row = _train(tmp_path, "local", *THREE_SMALL, "--local")[-1]
    per_sample = [r["perf/controller_bytes_per_sample"] for r in (three_steps[-1], local_row)]
    assert max(per_sample) <= 1024, per_sample
    assert abs(per_sample[0] - per_sample[1]) <= 0.25 * per_sample[1], per_sample


@pytest.mark.slow
def test_advantages_in_the_update_change_no_number_on_two_ranks(tmp_path, three_steps):
    """The default folds the advantage phase into the actor update (its shard holds whole
    groups, tests/trainer/test_advantages_in_update.py); on 2 FSDP ranks with a separate
    phase on the same shards every metric is the same, bit for bit."""
    phase = _train(tmp_path, "phase", *THREE_SMALL, "-s", 'engines.train.advantage_pass="always"')
    assert all("timing_s/adv" not in r for r in three_steps)
    assert all("timing_s/adv" in r for r in phase)
    assert deterministic(three_steps) == deterministic(phase)


@pytest.mark.slow
def test_transferqueue_data_plane_runs_the_same_steps(tmp_path, three_steps):
    tq_rows = _train(tmp_path, "tq", *THREE_SMALL, "-s", 'data_plane.backend="transferqueue"')
    # The data plane is an engine choice: it must not change the math.
    for key in ("critic/score/mean", "actor/pg_loss"):
        assert [r[key] for r in tq_rows] == [r[key] for r in three_steps], key


@pytest.mark.slow
@pytest.mark.parametrize("recipe", [
    "tiny_ppo_gae.toml",  # PPO: the critic and GAE end to end
    pytest.param("tiny_rloo.toml", marks=pytest.mark.heavy),  # only the estimator differs
])
def test_other_cpu_recipes_run_a_few_steps(tmp_path, recipe):
    cmd = [
        sys.executable,
        "-m",
        "rlctl",
        "train",
        str(REPO / "recipes" / recipe),
        "--quiet",
        "--local",
        "-s",
        f'run.output_dir="{tmp_path}"',
        "-s",
        "schedule.total_steps=3",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(tmp_path.iterdir())
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    if recipe == "tiny_ppo_gae.toml":
        assert "critic/vf_loss" in rows[-1]
