"""recipes/tiny_dapo.toml end to end in Ray mode: dynamic sampling at work, read from metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tiny_dapo_filters_groups_and_fills_every_step(tmp_path: Path) -> None:
    steps = 4
    cmd = [sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_dapo.toml"),
           "--quiet", "-s", f'run.output_dir="{tmp_path}"', "-s", f"schedule.total_steps={steps}"]
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = (tmp_path / "tiny-dapo" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines if x.strip()]
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    for r in rows:
        draws = r["dynamic_sampling/gen_batches"]
        assert 1 <= draws <= 20  # max_draws
        assert r["dynamic_sampling/groups_drawn"] == 48 * draws  # prompts_per_draw
        assert 32 <= r["dynamic_sampling/groups_kept"]  # a full step of 32 groups
    # the filter at work: the random model scores most groups alike, they are dropped
    assert all(r["dynamic_sampling/groups_kept"] < r["dynamic_sampling/groups_drawn"]
               for r in rows)
    assert sum(r["dynamic_sampling/gen_batches"] for r in rows) > steps  # it drew again


@pytest.mark.slow
@pytest.mark.heavy  # tests/trainer/test_dapo_training.py runs the reward model in-process
def test_a_reward_model_scores_in_its_own_ray_actors(tmp_path: Path) -> None:
    """Ray mode: two reward-worker actors score each draw of tiny_dapo, mixed with the rule."""
    from rlctl.config.recipe import TinyModelSection
    from rlctl.models.tiny import build_tiny_reward_model

    rm_dir = tmp_path / "tiny-rm"
    build_tiny_reward_model(TinyModelSection(), seed=5).save_pretrained(rm_dir)
    overlay = tmp_path / "rm.toml"
    overlay.write_text(
        '[[rewards]]\nname = "digits_match"\n\n[[rewards]]\nname = "reward_model"\n'
        f'weight = 0.5\noptions = {{ path = "{rm_dir}", dtype = "float32" }}\n\n'
        "[engines.reward]\nworkers = 2\n")
    cmd = [sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_dapo.toml"),
           str(overlay), "--quiet", "-s", f'run.output_dir="{tmp_path}"',
           "-s", "schedule.total_steps=2", "-s", "algorithm.dynamic_sampling.metric=reward_model"]
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = (tmp_path / "tiny-dapo" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines if x.strip()]
    assert len(rows) == 2
    for r in rows:
        assert r["critic/score/mean"] == pytest.approx(
            r["reward/digits_match"] + 0.5 * r["reward/reward_model"], abs=1e-5)
        # a continuous score varies in every group: one draw fills the step
        assert r["dynamic_sampling/gen_batches"] == 1.0
        assert r["dynamic_sampling/groups_kept"] == r["dynamic_sampling/groups_drawn"] == 48
