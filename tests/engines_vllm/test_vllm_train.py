"""`rlctl train` with the vllm rollout engine: real server, weight sync every step, both modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_env import VLLM_PYTHON, requires_vllm_env

REPO = Path(__file__).resolve().parents[2]


@requires_vllm_env
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["--local", "--quiet"])
def test_train_with_vllm_rollout(tmp_path, mode):
    cmd = [
        sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_grpo.toml"), "--quiet", mode,
        "-s", "engines.rollout.backend=vllm", "-s", "model.tiny.head_dim=32",
        "-s", f'engines.rollout.options.python="{VLLM_PYTHON}"',
        "-s", f'run.output_dir="{tmp_path}"', "-s", "schedule.total_steps=3",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(x) for x in next(tmp_path.iterdir()).joinpath("metrics.jsonl").read_text().splitlines()]
    assert [r["training/policy_version"] for r in rows] == [1.0, 2.0, 3.0]
    # the server's log-probs are the trainer's (processed logprobs, fp32)
    assert all(r["training/rollout_probs_diff"] < 1e-3 for r in rows)
    ps = subprocess.run(["pgrep", "-f", "vllm.entrypoints.openai.api_server"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "a vLLM server was left running"
