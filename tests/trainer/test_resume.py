"""Kill-and-resume equivalence: a run SIGKILLed mid-step and resumed logs exactly the metrics
of an uninterrupted run (CPU, --local, fixed seed), in sync and in streaming mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RECIPE = """
[run]
name = "{name}"
seed = 3
output_dir = "{out}"
device = "cpu"
[model]
path = "tiny"
dtype = "float32"
[data]
task = "count_digits"
[algorithm]
prompts_per_step = 8
group_size = 4
[algorithm.optim]
lr = 3e-3
[rollout]
max_new_tokens = 3
[[rewards]]
name = "digits_match"
[engines.train]
ranks = 1
micro_batch_size = 16
[data_plane]
backend = "memory"
[resources]
mode = "local"
[schedule]
total_steps = 6
save_every = 2
keep_last = 2
[logging]
sinks = ["jsonl"]
progress = false
"""

VOLATILE = ("timing_s/", "perf/throughput", "time")


# k = 1 with drop-and-refill two steps ahead: a checkpoint after step t holds the finished
# samples of steps t + 1 and t + 2, and step t + 2's are evicted (too stale) after resuming.
STREAMING = """
[algorithm.staleness]
policy = "bounded"
[algorithm.staleness.options]
max_staleness = 1
on_stale = "drop"
lookahead = 2
"""


def _write(tmp: Path, name: str, extra: str = "") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(RECIPE.format(name=name, out=tmp / "runs") + extra)
    return path


def _cmd(recipe: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rlctl", "train", str(recipe), "--quiet", *extra]


def _metrics(run_dir: Path) -> list[dict]:
    rows = [
        json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rows]


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    env = dict(os.environ, PYTHONHASHSEED="0")
    ref = _write(tmp_path, "ref")
    subprocess.run(_cmd(ref), check=True, env=env, timeout=600)
    expected = _metrics(tmp_path / "runs" / "ref")
    assert [r["step"] for r in expected] == list(range(1, 7))
    _check_export_on_request(tmp_path / "runs" / "ref", tmp_path / "exported")

    killed = _write(tmp_path, "killed")
    run_dir = tmp_path / "runs" / "killed"
    _kill_after_three_steps(_cmd(killed), env, run_dir)

    resumed = subprocess.run(_cmd(killed, "--resume"), env=env, timeout=600, check=False)
    assert resumed.returncode == 0
    got = _metrics(run_dir)
    assert [r["step"] for r in got] == list(range(1, 7))
    assert got == [dict(r) for r in expected]
    assert (run_dir / "hf" / "config.json").is_file()  # the final HF export


def _kill_after_three_steps(cmd: list[str], env: dict[str, str], run_dir: Path) -> None:
    proc = subprocess.Popen(cmd, env=env)
    deadline = time.monotonic() + 600
    # Three logged steps means step 2's checkpoint is committed (a step logs, then saves).
    while time.monotonic() < deadline:
        lines = (
            (run_dir / "metrics.jsonl").read_text().splitlines()
            if (run_dir / "metrics.jsonl").exists()
            else []
        )
        if len(lines) >= 3 or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


def _dumps(run_dir: Path) -> list[list[dict]]:
    """Every step's decoded trained samples, without their random uids."""
    out = []
    for path in sorted((run_dir / "rollouts").glob("step_*.jsonl")):
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        out.append([{k: v for k, v in r.items() if k != "key"} for r in rows])
    return out


@pytest.mark.slow
def test_streaming_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    """What is compared: every logged metric of all 4 steps except timings and throughput
    (streaming/staleness_*, dropped_groups and in_flight included), and every trained
    sample of every step (prompt, response, reward, advantage, dispatch step, weight
    versions). The checkpoint after step 2 holds the finished samples of steps 3 and 4."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    dump = ("-s", "logging.rollout_dump_samples=32", "-s", "schedule.total_steps=4")
    ref = _write(tmp_path, "sref", STREAMING)  # names of one length: the dump path is metered
    subprocess.run(_cmd(ref, *dump), check=True, env=env, timeout=600)
    expected = _metrics(tmp_path / "runs" / "sref")
    assert [r["streaming/dropped_groups"] for r in expected] == [0.0, 0.0, 8.0, 8.0]

    killed = _write(tmp_path, "skil", STREAMING)
    run_dir = tmp_path / "runs" / "skil"
    _kill_after_three_steps(_cmd(killed, *dump), env, run_dir)
    state = json.loads((run_dir / "checkpoints" / "step_2" / "trainer_state.json").read_text())
    assert [d["step"] for d in state["extra"]["producer"]["in_flight"]] == [3, 4]
    assert state["extra"]["producer"]["samples"] == 2 * 32

    resumed = subprocess.run(_cmd(killed, "--resume", *dump), env=env, timeout=600,
                             check=False)
    assert resumed.returncode == 0
    got = _metrics(run_dir)
    assert [r["step"] for r in got] == [1, 2, 3, 4]
    assert got == expected
    assert _dumps(run_dir) == _dumps(tmp_path / "runs" / "sref")


@pytest.mark.slow
# a full first run; tests/cli/test_resume_preflight.py refuses the same in-process
@pytest.mark.heavy
def test_resume_with_a_changed_algorithm_is_refused(tmp_path):
    recipe = _write(tmp_path, "r")
    text = recipe.read_text().replace("total_steps = 6", "total_steps = 2")
    recipe.write_text(text)
    subprocess.run(_cmd(recipe), check=True, timeout=600)
    before = (tmp_path / "runs" / "r" / "config.toml").read_bytes()
    out = subprocess.run(_cmd(recipe, "--resume", "-s", "algorithm.optim.lr=0.01"),
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 2  # a bad input, refused before anything starts
    assert "\n  algorithm.optim.lr: the checkpoint was trained with 0.003" in out.stderr
    assert (tmp_path / "runs" / "r" / "config.toml").read_bytes() == before


@pytest.mark.slow
def test_resume_falls_back_from_an_incomplete_latest_and_a_torn_shard_fails_in_one_line(tmp_path):
    recipe = _write(tmp_path, "f")
    recipe.write_text(recipe.read_text().replace("total_steps = 6", "total_steps = 4"))
    subprocess.run(_cmd(recipe), check=True, timeout=600)
    ckpts = tmp_path / "runs" / "f" / "checkpoints"
    (ckpts / "step_4" / "COMPLETE").unlink()  # as if the last save was interrupted
    out = subprocess.run(_cmd(recipe, "--resume"), capture_output=True, text=True, timeout=600,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "names step_4, which is incomplete (an interrupted save): using step_2" in out.stderr
    assert f"resuming from {ckpts / 'step_2'}" in out.stderr
    # garbage of the recorded size passes the size check; the load itself names the shard
    (shard,) = (ckpts / "step_4" / "train" / "actor").glob("*.distcp")
    shard.write_bytes(b"\0" * shard.stat().st_size)
    out = subprocess.run(_cmd(recipe, "--resume"), capture_output=True, text=True, timeout=600,
                         check=False)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    (line,) = [x for x in out.stderr.splitlines() if "damaged" in x]
    assert line.startswith("training failed: WorkerError: train rank 0: load failed: cannot "
                           f"load checkpoint {ckpts / 'step_4' / 'train' / 'actor'}: "
                           "__0_0.distcp is damaged: UnpicklingError")


def _check_export_on_request(run_dir: Path, out: Path) -> None:
    """`rlctl export` of the last checkpoint equals the export written at the end of the run."""
    import torch
    from transformers import AutoModelForCausalLM

    subprocess.run(
        [sys.executable, "-m", "rlctl", "export", str(run_dir), "-o", str(out)],
        check=True,
        timeout=300,
    )
    a = AutoModelForCausalLM.from_pretrained(out).state_dict()
    b = AutoModelForCausalLM.from_pretrained(run_dir / "hf").state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
