"""`rlctl train` with the vllm rollout engine: real server, native weight sync every step, both
modes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines.rollout.vllm.vllm_env import VLLM_PYTHON, requires_vllm_env

REPO = Path(__file__).resolve().parents[4]


@requires_vllm_env
@pytest.mark.slow
@pytest.mark.parametrize(("mode", "transport"), [
    # heavy: the second full run with a server; the Ray one below stays in the default run
    pytest.param("--local", "http_bytes", marks=pytest.mark.heavy),
    ("--quiet", "file"),
])
def test_train_with_vllm_rollout(tmp_path, mode, transport):
    logs = tmp_path / "server-logs"
    cmd = [
        sys.executable,
        "-m",
        "rlctl",
        "train",
        str(REPO / "recipes" / "tiny_grpo.toml"),
        "--quiet",
        mode,
        "-s",
        "engines.rollout.backend=vllm",
        "-s",
        "model.tiny.head_dim=32",
        "-s",
        f'engines.rollout.options.python="{VLLM_PYTHON}"',
        "-s",
        f'engines.rollout.options.log_dir="{logs}"',
        "-s",
        f'engines.rollout.weight_sync_options.transport="{transport}"',
        "-s",
        f'run.output_dir="{tmp_path / "out"}"',
        "-s",
        "schedule.total_steps=3",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [
        json.loads(x)
        for x in next((tmp_path / "out").iterdir())
        .joinpath("metrics.jsonl")
        .read_text()
        .splitlines()
    ]
    # The controller refuses rollouts stamped with another weight version than the policy's:
    # 3 steps passing means each step's rollouts came from the version synced before it.
    assert [r["training/policy_version"] for r in rows] == [1.0, 2.0, 3.0]
    # the server's log-probs are the trainer's (processed logprobs, fp32): the weights arrived
    assert all(r["training/rollout_probs_diff"] < 1e-3 for r in rows)
    # Native lifecycle, not the reload fallback: one init, then start / update / finish per sync.
    (log,) = logs.glob("vllm-0-*.log")
    text = log.read_text()
    def posts(path: str) -> int:
        return len(re.findall(rf'"POST /{path}(\?[^ ]*)? HTTP/1.1" 200', text))

    # One sync per step (--local also syncs version 0 at the start).
    assert posts("init_weight_transfer_engine") == 1
    assert (
        3 <= posts("start_weight_update") == posts("finish_weight_update") == posts("resume") <= 4
    )
    assert posts("collective_rpc") == 0  # not the reload fallback
    ps = subprocess.run(
        ["pgrep", "-f", "vllm.entrypoints.openai.api_server"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ps.stdout.strip() == "", "a vLLM server was left running"
