"""Loading a DCP checkpoint never runs code from it, and a damaged one is one clear error.

The checkpoints here are real ``torch.distributed.checkpoint`` saves (one process, no
process group) of the tiny model with its AdamW state and LR schedule.
"""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

from rlctl.checkpoint import CheckpointDamaged, safe_dcp
from rlctl.config.recipe import OptimSection, TinyModelSection
from rlctl.engines.train.lr_schedule import build_optimizer, build_scheduler
from rlctl.models.tiny import build_tiny_model

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


class _Shell:
    """Pickles as ``os.system(command)``: what a crafted checkpoint would carry."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (self.command,))


def _state(seed: int = 0) -> dict:
    model = build_tiny_model(TinyModelSection(), seed)
    optim = build_optimizer(model.parameters(), OptimSection(lr=1e-3))
    sched = build_scheduler(optim, OptimSection(lr=1e-3), 10)
    ids = torch.randint(4, 20, (2, 6), generator=torch.Generator().manual_seed(seed))
    model(ids).logits.sum().backward()
    optim.step()
    sched.step()
    return {"model": get_model_state_dict(model),
            "optimizer": get_optimizer_state_dict(model, optim),
            "scheduler": sched.state_dict()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dcp") / "actor"
    dcp.save(_state(), checkpoint_id=path)
    return path


@pytest.fixture
def copy(saved: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(saved, tmp_path / "actor"))


def _shard(path: Path) -> Path:
    (shard,) = path.glob("*.distcp")
    return shard


def test_safe_load_restores_what_was_saved(saved: Path) -> None:
    want = _state()
    got = _state(seed=1)  # different weights, same structure
    safe_dcp.load(got, saved, no_dist=True)
    for name, tensor in want["model"].items():
        assert torch.equal(got["model"][name], tensor), name
    assert got["scheduler"] == want["scheduler"]
    full = safe_dcp.load_full(saved)
    assert set(full) == {"model", "optimizer", "scheduler"}
    assert full["scheduler"]["last_epoch"] == want["scheduler"]["last_epoch"]
    assert torch.equal(full["model"]["lm_head.weight"], want["model"]["lm_head.weight"])


def test_a_crafted_index_does_not_run_its_command(copy: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    (copy / ".metadata").write_bytes(pickle.dumps(_Shell(f"touch {marker}")))
    for load in (lambda: safe_dcp.load_full(copy),
                 lambda: safe_dcp.load(_state(), copy, no_dist=True),
                 lambda: safe_dcp.read_metadata_file(copy / ".metadata")):
        with pytest.raises(CheckpointDamaged, match=r"\.metadata is not a readable checkpoint "
                           r"index: UnpicklingError: refusing to load posix\.system"):
            load()
    assert not marker.exists()
    # the threat is real: torch's own reader runs it (this is what rlctl no longer calls)
    from torch.distributed.checkpoint import FileSystemReader

    with pytest.raises(AttributeError):  # os.system's exit code is no Metadata: too late
        FileSystemReader(copy).read_metadata()
    assert marker.exists()


def test_a_crafted_byte_item_does_not_run_its_command(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil"
    state = _state()
    state["extra"] = {"note": _Shell(f"touch {marker}")}  # a non-tensor item: pickled bytes
    dcp.save(state, checkpoint_id=path)
    assert not marker.exists()
    with pytest.raises(CheckpointDamaged, match="not plain data"):
        safe_dcp.load_full(path)
    target = _state()
    target["extra"] = {"note": None}
    with pytest.raises(CheckpointDamaged, match=r"\.distcp: .*not plain data"):
        safe_dcp.load(target, path, no_dist=True)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda p: (p / ".metadata").write_bytes((p / ".metadata").read_bytes()[:100]),
         r"\.metadata is not a readable checkpoint index: UnpicklingError"),
        (lambda p: (p / ".metadata").unlink(),
         r"\.metadata is not a readable checkpoint index: FileNotFoundError"),
        (lambda p: _shard(p).write_bytes(_shard(p).read_bytes()[:1000]),
         r"__0_0\.distcp is damaged"),
        (lambda p: _shard(p).write_bytes(b"\0" * _shard(p).stat().st_size),
         r"__0_0\.distcp is damaged"),
        (lambda p: _shard(p).unlink(), r"__0_0\.distcp is damaged: FileNotFoundError"),
    ],
    ids=["index cut", "index gone", "shard cut", "shard zeroed", "shard gone"],
)
def test_damage_is_one_error_naming_the_file(copy: Path, damage, match: str) -> None:  # type: ignore[no-untyped-def]
    damage(copy)
    # CheckpointDamaged is an Exception: torch's CheckpointException (a BaseException that
    # slipped past every `except Exception`) never leaves safe_dcp
    assert issubclass(CheckpointDamaged, Exception)
    with pytest.raises(CheckpointDamaged, match=match) as err:
        safe_dcp.load_full(copy)
    assert "\n" not in str(err.value)
    with pytest.raises(CheckpointDamaged, match=match):
        safe_dcp.load(_state(), copy, no_dist=True)
