"""Faults around a run directory, with real runs: SIGTERM, two runs on one directory, a
refused resume. Slow (they train), each bounded by a tight timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlctl.run.entry import train_from_recipe
from rlctl.run.run_lock import LOCK_FILE

ROOT = Path(__file__).resolve().parents[2]

RECIPE = """
[run]
name = "r"
seed = {seed}
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
total_steps = {steps}
[logging]
sinks = ["jsonl"]
progress = false
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")


def _rlctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlctl", *args]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(predicate, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before the test could act")
        time.sleep(0.1)
    pytest.fail(f"not reached within {timeout} s")


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigterm_stops_a_run_like_ctrl_c_with_exit_143(tmp_path):
    """The shipped tiny recipe with --local still starts Ray (its data plane is `ray`): Ray's
    own SIGTERM handler used to abort the driver with a stack dump (exit 134)."""
    run_dir = tmp_path / "runs" / "tiny-grpo"
    proc = subprocess.Popen(
        _rlctl("train", "recipes/tiny_grpo.toml", "--local", "--quiet",
               "-s", "schedule.total_steps=200", "-s", f'run.output_dir="{tmp_path / "runs"}"'),
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for(lambda: len(_lines(run_dir / "metrics.jsonl")) >= 1, proc, timeout=150)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 143, err[-3000:]
    assert time.monotonic() - sent < 60
    assert "terminated" in err
    assert "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    assert not (run_dir / LOCK_FILE).exists()  # the lock was released on the way out
    assert len(_lines(run_dir / "metrics.jsonl")) >= 1  # what it logged is kept


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_second_run_on_a_busy_directory_is_refused_and_the_first_is_unharmed(tmp_path):
    out = tmp_path / "runs"
    first = tmp_path / "first.toml"
    first.write_text(RECIPE.format(seed=1, out=out, steps=6))
    second = tmp_path / "second.toml"
    second.write_text(RECIPE.format(seed=2, out=out, steps=2))
    run_dir = out / "r"
    proc = subprocess.Popen(_rlctl("train", str(first), "--quiet"), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (run_dir / LOCK_FILE).exists(), proc, timeout=60)
        started = time.monotonic()
        refused = subprocess.run(_rlctl("train", str(second), "--quiet"), env=_env(),
                                 capture_output=True, text=True, timeout=60, check=False)
        assert time.monotonic() - started < 30  # refused up front, not after its workers
        _, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert refused.returncode == 2, refused.stderr
    assert f"is in use by another run (pid {proc.pid} on host" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert proc.returncode == 0, err[-3000:]
    steps = [json.loads(line)["step"] for line in _lines(run_dir / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4, 5, 6]  # all of the first run's metrics, none lost
    assert "seed = 1\n" in (run_dir / "config.toml").read_text()  # its own config


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_refused_resume_changes_nothing_in_the_run_directory(make_recipe):
    recipe = make_recipe(schedule={"total_steps": 2, "save_every": 1})
    assert train_from_recipe(recipe) == 0
    run_dir = Path(recipe.run.output_dir) / recipe.run.name
    before = _tree(run_dir)
    assert "config.toml" in before and "metrics.jsonl" in before
    changed = make_recipe(schedule={"total_steps": 4, "save_every": 1},
                          algorithm={"optim": {"lr": 1e-2}})
    assert train_from_recipe(changed, resume=True) != 0  # the math changed: refused
    assert _tree(run_dir) == before
