"""`rlctl train` with the vllm rollout engine: real server, native weight sync every step, both
modes."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines.rollout.server.leftovers import servers_left_running
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
    # this run's servers only: another test's or user's may run meanwhile (pytest-xdist)
    assert servers_left_running(logs) == [], "a vLLM server was left running"


@requires_vllm_env
@pytest.mark.slow
@pytest.mark.heavy  # a third full run with a server; test_vllm_partial covers the engine side
@pytest.mark.timeout(600)
def test_streaming_with_partial_rollouts_aborts_and_resumes_in_a_real_run(tmp_path):
    """Ray mode, k = 1, partial_rollout = "resume": step t + 1 generates long responses while
    step t trains, so each weight update cuts them; every trained sample still has all its
    tokens, in spans of increasing versions, within the staleness bound."""
    logs, out_dir = tmp_path / "server-logs", tmp_path / "out"
    overrides = {
        "engines.rollout.backend": "vllm", "model.tiny.head_dim": "32",
        "model.tiny.max_position_embeddings": "128", "rollout.max_new_tokens": "96",
        "engines.rollout.options.ignore_eos": "true",  # every response is 96 tokens long
        "engines.rollout.options.python": f'"{VLLM_PYTHON}"',
        "engines.rollout.options.log_dir": f'"{logs}"',
        "algorithm.prompts_per_step": "16", "algorithm.group_size": "4",
        "engines.train.micro_batch_size": "32", "engines.train.log_prob_micro_batch_size": "32",
        "algorithm.staleness.policy": "bounded", "algorithm.staleness.options.max_staleness": "1",
        "algorithm.staleness.partial_rollout": '"resume"',
        "logging.rollout_dump_samples": "64", "logging.sinks": '["jsonl"]',
        "run.output_dir": f'"{out_dir}"', "schedule.total_steps": "4",
    }
    cmd = [sys.executable, "-m", "rlctl", "train", str(REPO / "recipes" / "tiny_grpo.toml"),
           "--quiet", *(a for k, v in overrides.items() for a in ("-s", f"{k}={v}"))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=580, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(out_dir.iterdir())
    rows = [json.loads(x) for x in run_dir.joinpath("metrics.jsonl").read_text().splitlines()]
    aborts = [r["rollout/partial_aborts"] for r in rows]
    print(f"\npartial aborts per step {aborts}, resumes "
          f"{[r['rollout/partial_resumes'] for r in rows]}, segments per sample "
          f"{[r['rollout/partial_segments_mean'] for r in rows]}")
    assert sum(aborts) > 0 and aborts == [r["rollout/partial_resumes"] for r in rows]
    assert max(r["rollout/partial_segments_mean"] for r in rows) > 1
    assert all(r["streaming/staleness_max"] <= 1 for r in rows)
    for path in sorted((run_dir / "rollouts").glob("step_*.jsonl")):
        step = int(path.stem.removeprefix("step_"))
        for sample in map(json.loads, path.read_text().splitlines()):
            spans = sample["weight_segments"]
            assert sample["response_len"] == 96 and spans[0][1] == 0 and spans[-1][2] == 96
            assert all(a[2] == b[1] for a, b in itertools.pairwise(spans))
            versions = [v for v, _, _ in spans]
            assert versions == sorted(set(versions))
            assert (sample["weight_version_min"], sample["weight_version_max"]) == (
                versions[0], versions[-1])
            assert step - 1 - sample["weight_version_min"] <= 1  # staleness from the oldest span
    (log,) = logs.glob("vllm-0-*.log")
    assert '"POST /abort_requests HTTP/1.1" 200' in log.read_text()
