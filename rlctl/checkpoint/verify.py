"""Is a complete checkpoint intact? Checked before anything loads it.

``COMPLETE`` records the size of every file the save wrote. A shard cut short by a full disk,
a copy that stopped half-way or a file overwritten since shows up here as one line naming
the file, instead of a 90-line traceback from deep inside torch once the workers are up.
The small files are parsed too (``trainer_state.json``, ``config.json``, ``rollout.json``),
and each ``torch.distributed.checkpoint`` index (``.metadata``) is read with the
allow-listed unpickler of :mod:`rlctl.checkpoint.safe_dcp`, so a crafted one is refused here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from rlctl import regular_file
from rlctl.checkpoint.manager import (
    COMPLETE_MARKER,
    CheckpointDamaged,
    CheckpointError,
    read_manifest,
)
from rlctl.checkpoint.trainer_state import TRAINER_STATE_FILE, TrainerState

_JSON_FILES = (TRAINER_STATE_FILE, "config.json", "rollout.json", "in_flight/samples.json")
_INDEX_NAME = ".metadata"


def verify_checkpoint(path: Path | str, *, read_indexes: bool = True) -> None:
    """Raise :class:`CheckpointDamaged` naming the first file that does not match ``COMPLETE``.

    ``read_indexes`` also reads every DCP index safely (imports torch).
    """
    path = Path(path)
    manifest = read_manifest(path)
    if manifest is None:
        raise CheckpointError(f"{path} is not a complete checkpoint (no valid {COMPLETE_MARKER})")
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in files.items()
    ):
        raise CheckpointDamaged(f"{path / COMPLETE_MARKER} has no valid file list")
    for rel, size in sorted(files.items()):
        _check_listed(path, rel, size)
    for name in _JSON_FILES:
        if os.path.lexists(path / name):
            _check_json(path / name)
    if read_indexes:
        from rlctl.checkpoint.safe_dcp import read_metadata_file

        for rel in sorted(files):
            if PurePosixPath(rel).name == _INDEX_NAME:
                read_metadata_file(path / rel)


def _check_listed(path: Path, rel: str, size: int) -> None:
    """File ``rel`` that ``COMPLETE`` lists with ``size`` bytes is there, a file, that size."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise CheckpointDamaged(
            f"{path / COMPLETE_MARKER} lists {rel!r}, a path outside the checkpoint")
    file = path / rel
    if not file.exists():
        raise CheckpointDamaged(f"{file} is missing (COMPLETE lists it, {size} bytes)")
    odd = regular_file.not_regular(file)  # a FIFO would hang whoever reads it
    if odd is not None:
        raise CheckpointDamaged(f"{odd}, where COMPLETE lists a file of {size} bytes")
    actual = file.stat().st_size
    if actual != size:
        raise CheckpointDamaged(
            f"{file} has {actual} bytes but COMPLETE records {size}: it was "
            f"{'cut short' if actual < size else 'changed'} after the save")


def _check_json(file: Path) -> None:
    try:
        data = json.loads(regular_file.read_text(file))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointDamaged(f"{file} is not valid JSON: {exc}") from None
    if file.name == TRAINER_STATE_FILE:
        if not isinstance(data, dict):
            raise CheckpointDamaged(f"{file} does not hold a trainer state")
        try:
            TrainerState.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise CheckpointDamaged(f"{file}: {exc}") from None
