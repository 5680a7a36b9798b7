"""`rlctl train` with the sglang rollout engine: real server, weight sync every step, both modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines.rollout.server.leftovers import servers_left_running
from tests.engines.rollout.sglang.sglang_env import SGLANG_PYTHON, requires_sglang_env

REPO = Path(__file__).resolve().parents[4]


@requires_sglang_env
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("mode", "transport"), [
    # heavy, both: a full run with a server costs minutes on 2 cores; test_sglang_engine runs the
    # real server (generation, parity with hf, all three weight syncs) in the default run
    pytest.param("--local", "tensor", marks=pytest.mark.heavy),
    pytest.param("--quiet", "distributed", marks=pytest.mark.heavy),
])
def test_train_with_sglang_rollout(tmp_path, mode, transport):
    logs, out_dir = tmp_path / "server-logs", tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "rlctl",
        "train",
        str(REPO / "recipes" / "tiny_grpo.toml"),
        "--quiet",
        mode,
        "-s",
        "engines.rollout.backend=sglang",
        "-s",
        "model.tiny.head_dim=32",
        "-s",
        f'engines.rollout.options.python="{SGLANG_PYTHON}"',
        "-s",
        "engines.rollout.options.startup_timeout_s=600",
        "-s",
        f'engines.rollout.weight_sync_options.transport="{transport}"',
        "-s",
        f'engines.rollout.options.log_dir="{logs}"',
        "-s",
        f'run.output_dir="{out_dir}"',
        "-s",
        "schedule.total_steps=3",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=850, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [
        json.loads(x)
        for x in next(out_dir.iterdir()).joinpath("metrics.jsonl").read_text().splitlines()
    ]
    assert [r["training/policy_version"] for r in rows] == [1.0, 2.0, 3.0]
    # the server's log-probs are the trainer's (temperature-scaled, fp32)
    assert all(r["training/rollout_probs_diff"] < 1e-3 for r in rows)
    # this run's servers only: another test's or user's may run meanwhile (pytest-xdist)
    assert servers_left_running(logs) == [], "an SGLang server was left running"
