"""CheckpointManager: atomic commit, crash safety, latest pointer, pruning, resolve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlctl.checkpoint import CheckpointError, CheckpointManager, is_complete, read_manifest
from rlctl.checkpoint import manager as manager_module


def save(manager: CheckpointManager, step: int, payload: str = "weights") -> Path:
    tmp = manager.begin(step)
    (tmp / "model").mkdir()
    (tmp / "model" / "rank0.bin").write_text(f"{payload}-{step}")
    (tmp / "trainer_state.json").write_text(json.dumps({"step": step}))
    return manager.commit(tmp, step, metadata={"policy_version": step})


def test_commit_makes_a_complete_checkpoint_and_moves_latest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    assert manager.latest() is None
    final = save(manager, 10)
    assert final == tmp_path / "checkpoints" / "step_10"
    manifest = read_manifest(final)
    assert manifest is not None
    assert manifest["step"] == 10 and manifest["metadata"] == {"policy_version": 10}
    assert manifest["files"] == {
        "model/rank0.bin": len("weights-10"),
        "trainer_state.json": len('{"step": 10}'),
    }
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_10\n"
    assert manager.latest() == final
    save(manager, 20)
    assert manager.latest() == tmp_path / "checkpoints" / "step_20"
    # nothing but the checkpoints and the pointer is left behind
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest",
        "step_10",
        "step_20",
    ]


def test_a_process_killed_mid_save_leaves_no_valid_checkpoint(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    save(manager, 5)
    # A real crash: another process begins step 10, writes part of it, and is SIGKILLed.
    script = textwrap.dedent(
        f"""
        import os, signal
        from rlctl.checkpoint import CheckpointManager
        m = CheckpointManager({str(tmp_path)!r})
        tmp = m.begin(10)
        (tmp / "shard0.bin").write_bytes(b"x" * 1000)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    partial = tmp_path / "checkpoints" / ".step_10.partial"
    assert partial.is_dir() and not is_complete(partial)
    # the interrupted save is ignored...
    assert manager.latest() == tmp_path / "checkpoints" / "step_5"
    assert [c.step for c in CheckpointManager(tmp_path).checkpoints()] == [5]
    # ...and cleaned by the next save
    save(manager, 10)
    assert not partial.exists()
    assert manager.latest() == tmp_path / "checkpoints" / "step_10"


def test_crash_after_the_marker_but_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    save(manager, 1)

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(manager_module.os, "rename", crash)
    with pytest.raises(OSError, match="simulated crash"):
        save(manager, 2)
    monkeypatch.undo()
    # COMPLETE was written inside the hidden work directory, which never counts
    assert is_complete(tmp_path / "checkpoints" / ".step_2.partial")
    assert manager.latest() == tmp_path / "checkpoints" / "step_1"
    assert manager.clean_incomplete() == [tmp_path / "checkpoints" / ".step_2.partial"]


def test_crash_before_latest_moves_keeps_the_previous_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    save(manager, 1)

    def crash(path: object, text: str, **kwargs: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(manager_module, "atomic_write_text", crash)
    with pytest.raises(OSError):
        save(manager, 2)
    monkeypatch.undo()
    assert is_complete(tmp_path / "checkpoints" / "step_2")  # complete, but latest never moved
    assert manager.latest() == tmp_path / "checkpoints" / "step_1"


def test_latest_falls_back_to_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=5)
    for step in (1, 2, 3):
        save(manager, step)
    (tmp_path / "checkpoints" / "latest").unlink()
    assert manager.latest() == tmp_path / "checkpoints" / "step_3"
    (tmp_path / "checkpoints" / "step_3" / "COMPLETE").unlink()  # damaged by hand
    assert manager.latest() == tmp_path / "checkpoints" / "step_2"
    (tmp_path / "checkpoints" / "latest").write_text("step_3\n")
    assert manager.latest() == tmp_path / "checkpoints" / "step_2"


def test_prune_keeps_the_last_n(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in (10, 20, 30, 40):
        save(manager, step)
    assert [c.step for c in manager.checkpoints()] == [30, 40]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest",
        "step_30",
        "step_40",
    ]


def test_prune_never_deletes_what_latest_points_to(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    for step in (1, 2, 3):
        save(manager, step)
    # latest names an older checkpoint (a crash between a commit's rename and its pointer move)
    (tmp_path / "checkpoints" / "latest").write_text("step_1\n")
    assert CheckpointManager(tmp_path, keep_last=1).prune() == [tmp_path / "checkpoints" / "step_2"]
    assert [c.step for c in manager.checkpoints()] == [1, 3]


def test_saving_a_step_again_replaces_it(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=3)
    save(manager, 7, payload="old")
    final = save(manager, 7, payload="new")
    assert (final / "model" / "rank0.bin").read_text() == "new-7"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step_7"]


def test_commit_refuses_a_directory_that_begin_did_not_return(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    tmp = manager.begin(3)
    with pytest.raises(CheckpointError, match="not the work directory of step 4"):
        manager.commit(tmp, 4)
    manager.abort(tmp)
    with pytest.raises(CheckpointError, match="does not exist"):
        manager.commit(tmp, 3)


def test_resolve(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    manager = CheckpointManager(run, keep_last=3)
    with pytest.raises(
        CheckpointError, match="no complete checkpoint under .*run without --resume"
    ):
        manager.resolve(None)
    save(manager, 1)
    save(manager, 2)
    step_1 = run / "checkpoints" / "step_1"
    step_2 = run / "checkpoints" / "step_2"
    assert manager.resolve(None) == step_2
    assert manager.resolve(step_1) == step_1
    assert manager.resolve(run) == step_2  # a run directory
    assert manager.resolve(run / "checkpoints") == step_2
    assert manager.resolve(str(step_1)) == step_1
    (step_1 / "COMPLETE").unlink()
    with pytest.raises(CheckpointError, match=r"incomplete .*\(complete: step_2\)"):
        manager.resolve(step_1)
    with pytest.raises(CheckpointError, match="no such file"):
        manager.resolve(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        manager.resolve(tmp_path)


def test_keep_last_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep_last"):
        CheckpointManager(tmp_path, keep_last=0)


def test_non_durable_mode_skips_fsync_but_stays_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    save(CheckpointManager(tmp_path / "a", durable=False), 1)
    assert calls == []
    save(CheckpointManager(tmp_path / "b", durable=True), 1)
    assert len(calls) >= 4  # the files, the marker, the directories, the pointer
