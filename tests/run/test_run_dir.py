"""A run's claim on its directory: the lock (real processes hold it), the fresh-run check,
and a run that does not start leaving the directory as it found it. No workers start here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlctl.checkpoint import EXPORT_MARKER
from rlctl.run.run_dir import RunDirectory, RunDirError
from rlctl.run.run_lock import LOCK_FILE, RunLock, RunLockedError

ROOT = Path(__file__).resolve().parents[2]
# Holds the lock of argv[1] until its stdin closes (or it is killed).
HOLDER = (
    "import sys; from pathlib import Path; "
    "from rlctl.run.run_lock import RunLock; "
    "lock = RunLock.acquire(Path(sys.argv[1])); print('locked', flush=True); sys.stdin.read(); "
    "lock.release()"
)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` (files with their bytes, directories as None)."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def holder(tmp_path: Path):
    """Start a process that holds the lock of a directory; yields (process, run_dir)."""
    procs: list[subprocess.Popen] = []

    def start(run_dir: Path) -> subprocess.Popen:
        run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def test_a_second_holder_is_refused_and_told_who_holds_it(holder, tmp_path) -> None:
    run_dir = tmp_path / "run"
    proc = holder(run_dir)
    with pytest.raises(RunLockedError) as caught:
        RunLock.acquire(run_dir)
    message = str(caught.value)
    assert f"pid {proc.pid} on host " in message and "started " in message
    assert caught.value.holder is not None and caught.value.holder["pid"] == proc.pid
    assert "another run.name or run.output_dir" in message


def test_the_lock_of_a_killed_run_is_taken_over(holder, tmp_path) -> None:
    run_dir = tmp_path / "run"
    proc = holder(run_dir)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert (run_dir / LOCK_FILE).exists()  # a killed run cannot clean up: the file stays
    lock = RunLock.acquire(run_dir)
    try:
        assert lock.previous is not None and lock.previous["pid"] == proc.pid
        assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == os.getpid()
    finally:
        lock.release()
    assert not (run_dir / LOCK_FILE).exists()  # a clean release removes it


def test_a_released_lock_is_free_again(tmp_path) -> None:
    first = RunLock.acquire(tmp_path)
    first.release()
    second = RunLock.acquire(tmp_path)
    assert second.previous is None  # released cleanly: no record of a dead holder
    second.release()


def test_a_fresh_run_refuses_a_previous_runs_results_and_changes_nothing(tmp_path) -> None:
    run_dir = tmp_path / "runs" / "r"
    (run_dir / "checkpoints" / "step_2").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (run_dir / "config.toml").write_text("[run]\nname = 'r'\n")
    before = snapshot(tmp_path)
    refused = pytest.raises(
        RunDirError,
        match=r"already holds a run \(checkpoints/, metrics.jsonl\).*--resume.*run.name",
    )
    with refused, RunDirectory(run_dir, resume=False):
        pytest.fail("the claim must refuse")
    assert snapshot(tmp_path) == before
    with RunDirectory(run_dir, resume=True) as claim:  # a resume continues those files
        assert claim.lock is not None
    assert snapshot(tmp_path) == before


def test_what_a_run_that_never_logged_leaves_may_be_reused(tmp_path) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    for name, text in (("config.toml", "x"), ("run_info.json", "{}"), ("metrics.jsonl", "")):
        (run_dir / name).write_text(text)
    with RunDirectory(run_dir, resume=False) as claim:
        claim.mark_started()


def test_a_run_that_does_not_start_leaves_no_trace(tmp_path) -> None:
    run_dir = tmp_path / "out" / "deeper" / "r"
    with pytest.raises(RuntimeError, match="workers failed"), RunDirectory(run_dir, resume=False):
        assert (run_dir / LOCK_FILE).is_file()
        raise RuntimeError("workers failed")
    assert os.listdir(tmp_path) == []  # the lock, r/, deeper/ and out/ are gone


def test_a_started_run_keeps_its_directory(tmp_path) -> None:
    run_dir = tmp_path / "r"
    with pytest.raises(RuntimeError), RunDirectory(run_dir, resume=False) as claim:
        claim.mark_started()
        (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
        raise RuntimeError("step 2 failed")
    assert os.listdir(run_dir) == ["metrics.jsonl"]


def test_a_run_dir_that_is_a_file_or_an_hf_dir_of_the_user_is_refused(tmp_path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        RunDirectory(tmp_path / "f", resume=False).__enter__()
    run_dir = tmp_path / "r"
    (run_dir / "hf").mkdir(parents=True)
    (run_dir / "hf" / "model.safetensors").write_text("the user's")
    before = snapshot(tmp_path)
    with pytest.raises(RunDirError, match="final HF export"):
        RunDirectory(run_dir, resume=True).__enter__()
    assert snapshot(tmp_path) == before
    (run_dir / "hf" / EXPORT_MARKER).write_text("{}")  # an export of an earlier run: fine
    with RunDirectory(run_dir, resume=True):
        pass


def test_only_a_resume_from_this_runs_own_checkpoints_continues_its_directory(make_recipe) -> None:
    from rlctl.config.pipeline import validate_recipe
    from rlctl.run.entry import Run

    recipe = make_recipe()
    loaded = validate_recipe(recipe)
    run_dir = Path(recipe.run.output_dir) / recipe.run.name

    def continues(resume) -> bool:  # type: ignore[no-untyped-def]
        return Run(loaded, quiet=True, resume=resume).continues_this_run

    assert not continues(None)
    assert continues(True) and continues("latest")
    assert continues(str(run_dir)) and continues(str(run_dir / "checkpoints" / "step_4"))
    # another run's checkpoint: this directory is started afresh, so it must hold no run
    assert not continues(str(run_dir.parent / "other" / "checkpoints" / "step_4"))
