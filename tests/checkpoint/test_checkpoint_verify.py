"""A complete checkpoint is checked against its COMPLETE manifest before anything loads it,
and a resume says which checkpoint it fell back to."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from rlctl.checkpoint import (
    CheckpointDamaged,
    CheckpointManager,
    TrainerState,
    save_config_snapshot,
)
from rlctl.checkpoint.verify import verify_checkpoint

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


def _commit(manager: CheckpointManager, step: int) -> Path:
    """A checkpoint as the trainer writes it: DCP shards, trainer state, config, rollout."""
    import torch
    import torch.distributed.checkpoint as dcp

    tmp = manager.begin(step)
    dcp.save({"model": {"w": torch.arange(64.0).reshape(8, 8)}, "scheduler": {"last_epoch": step}},
             checkpoint_id=tmp / "train" / "actor")
    TrainerState(step=step, policy_version=step).save(tmp)
    save_config_snapshot(tmp, {"run": {"name": "r"}})
    (tmp / "rollout.json").write_text("[{}]")
    return manager.commit(tmp, step)


@pytest.fixture
def manager(tmp_path: Path) -> CheckpointManager:
    m = CheckpointManager(tmp_path / "run", keep_last=5, durable=False)
    for step in (1, 2):
        _commit(m, step)
    return m


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_an_intact_checkpoint_passes(manager: CheckpointManager) -> None:
    for info in manager.checkpoints():
        verify_checkpoint(info.path)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda c: _cut(c / "train/actor/__0_0.distcp", 10),
         r"train/actor/__0_0\.distcp has 10 bytes but COMPLETE records \d+: it was cut short"),
        (lambda c: _cut(c / "train/actor/.metadata", 10),
         r"train/actor/\.metadata has 10 bytes but COMPLETE records \d+"),
        (lambda c: (c / "trainer_state.json").write_text(
            (c / "trainer_state.json").read_text() + " "),
         r"trainer_state\.json has \d+ bytes but COMPLETE records \d+: it was changed"),
        (lambda c: (c / "rollout.json").unlink(), r"rollout\.json is missing \(COMPLETE lists it"),
        (lambda c: (c / "trainer_state.json").write_text(
            "x" * (c / "trainer_state.json").stat().st_size),
         r"trainer_state\.json is not valid JSON"),
        (lambda c: _same_size(c / "config.json", b"["),
         r"config\.json is not valid JSON"),
        (lambda c: _rewrite_state(c, format_version=99), r"trainer state format 99 is not 1"),
        (lambda c: _rewrite_manifest(c, {"../../etc/passwd": 1}), "a path outside the checkpoint"),
        (lambda c: _rewrite_manifest(c, None), "has no valid file list"),
        (lambda c: _same_size(c / "train/actor/.metadata", b"\0"),
         r"\.metadata is not a readable checkpoint index"),
    ],
    ids=["shard cut", "index cut", "state grew", "file gone", "state garbage", "config garbage",
         "state format", "path escape", "no file list", "index garbage"],
)
def test_damage_names_the_file(manager: CheckpointManager, damage, match: str) -> None:  # type: ignore[no-untyped-def]
    ckpt = manager.step_path(2)
    damage(ckpt)
    with pytest.raises(CheckpointDamaged, match=match) as err:
        verify_checkpoint(ckpt)
    assert "\n" not in str(err.value)
    verify_checkpoint(manager.step_path(1))  # the other checkpoint is untouched


def test_a_crafted_index_of_the_right_size_is_refused_unrun(
    manager: CheckpointManager, tmp_path: Path
) -> None:
    marker = tmp_path / "PWNED"

    class Shell:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, (f"touch {marker}",))

    ckpt = manager.step_path(2)
    index = ckpt / "train/actor/.metadata"
    index.write_bytes(pickle.dumps(Shell()))
    _rewrite_manifest(ckpt, {**_manifest(ckpt)["files"],
                             "train/actor/.metadata": index.stat().st_size})
    with pytest.raises(CheckpointDamaged, match="refusing to load posix.system"):
        verify_checkpoint(ckpt)
    assert not marker.exists()


def test_latest_falls_back_and_says_so(manager: CheckpointManager) -> None:
    assert manager.fallback_note() is None
    (manager.step_path(2) / "COMPLETE").unlink()  # an interrupted save of step 2
    assert manager.latest() == manager.step_path(1)
    assert manager.fallback_note() == (
        f"{manager.root / 'latest'} names step_2, which is incomplete (an interrupted save): "
        "using step_1")


def _manifest(ckpt: Path) -> dict:
    return json.loads((ckpt / "COMPLETE").read_text())


def _rewrite_manifest(ckpt: Path, files: dict | None) -> None:
    manifest = _manifest(ckpt)
    manifest["files"] = files
    (ckpt / "COMPLETE").write_text(json.dumps(manifest))


def _rewrite_state(ckpt: Path, **changes: object) -> None:
    path = ckpt / "trainer_state.json"
    state = {**json.loads(path.read_text()), **changes}
    path.write_text(json.dumps(state))
    _rewrite_manifest(ckpt, {**_manifest(ckpt)["files"], "trainer_state.json":
                             path.stat().st_size})


def _same_size(path: Path, byte: bytes) -> None:
    path.write_bytes(byte * path.stat().st_size)
