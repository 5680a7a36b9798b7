"""Commands that read a run's checkpoints first ask whether the run is still training (its
run lock), so a checkpoint rotated away mid-read is not reported as damaged (issue 30)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlctl.config.problems import ConfigError
from rlctl.run.preflight import preflight
from rlctl.run.run_lock import LOCK_FILE, RunLock, holder_of, training_run


def test_a_held_lock_is_seen_and_a_free_one_is_not(tmp_path: Path) -> None:
    assert holder_of(tmp_path) is None  # no lock file at all
    lock = RunLock.acquire(tmp_path)
    try:
        holder = holder_of(tmp_path)
        assert holder is not None and holder["pid"] == os.getpid()
        (tmp_path / "checkpoints" / "step_3").mkdir(parents=True)
        for path in (tmp_path, tmp_path / "checkpoints", tmp_path / "checkpoints" / "step_3"):
            assert training_run(path) == (tmp_path, holder)
    finally:
        lock.release()
    (tmp_path / LOCK_FILE).write_text('{"pid": 1}')  # a lock file no process holds
    assert holder_of(tmp_path) is None and training_run(tmp_path) is None


def test_the_probe_leaves_the_lock_free_for_the_next_run(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("")
    assert holder_of(tmp_path) is None
    RunLock.acquire(tmp_path).release()  # not blocked by the probe


def test_resume_against_a_run_still_training_says_so(make_recipe) -> None:
    recipe = make_recipe()
    run_dir = Path(recipe.run.output_dir) / recipe.run.name
    run_dir.mkdir(parents=True)
    lock = RunLock.acquire(run_dir)
    try:
        with pytest.raises(ConfigError) as failure:
            preflight(recipe, resume=True)
    finally:
        lock.release()
    [problem] = failure.value.problems
    assert "is still training" in problem.message and "damaged" not in problem.message
    assert problem.source == "--resume"
