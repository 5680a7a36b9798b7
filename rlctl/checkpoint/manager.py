"""``CheckpointManager``: where checkpoints live and how they become valid.

Layout under ``<run_dir>/checkpoints/``::

    step_20/            a complete checkpoint: whatever the trainer wrote, plus
        COMPLETE        the manifest (step, time, file sizes, metadata), written last
    step_30/
    latest              pointer file: "step_30"
    .step_40.partial/   a save in progress (or left by a crash): never a valid checkpoint

Protocol (the trainer's controller drives it; workers only write files):

1. ``tmp = manager.begin(step)``: a fresh hidden ``.step_N.partial`` directory.
2. every rank writes its files into ``tmp`` (e.g. ``torch.distributed.checkpoint``).
3. ``manager.commit(tmp, step)``: fsync the files, write ``COMPLETE`` last, rename the
   directory to ``step_N`` (atomic), then move ``latest`` (temporary file + ``os.replace``),
   then prune to ``keep_last``.

A crash at any point leaves either a hidden partial directory (ignored, removed by the next
``begin`` or ``clean_incomplete``) or a complete ``step_N``; ``latest`` only ever names a
complete one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl import regular_file
from rlctl.checkpoint.atomic import atomic_write_json, atomic_write_text, fsync_dir, fsync_tree

CHECKPOINTS_DIR = "checkpoints"
COMPLETE_MARKER = "COMPLETE"
LATEST_POINTER = "latest"
_STEP_DIR = re.compile(r"^step_(\d+)$")
# Hidden work directories: a save in progress, a checkpoint being deleted or replaced.
_HIDDEN_WORK = re.compile(r"^\.step_\d+\.(partial|deleting|replaced)$")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, or the save protocol was misused."""


class CheckpointDamaged(CheckpointError):
    """A checkpoint marked complete whose files are missing, truncated, corrupt or crafted."""

    checkpoint: Path | None = None
    """The checkpoint directory, where the raiser knows it."""


@dataclass(frozen=True)
class CheckpointInfo:
    """A complete checkpoint on disk."""

    step: int
    path: Path
    manifest: dict[str, Any] = field(compare=False)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The ``COMPLETE`` manifest of a checkpoint directory, or ``None`` if it is not complete."""
    marker = Path(path) / COMPLETE_MARKER
    try:
        manifest = json.loads(regular_file.read_text(marker))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("step"), int):
        return None
    return manifest


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a complete checkpoint directory."""
    return read_manifest(path) is not None


class CheckpointManager:
    """Atomic save protocol, ``latest`` pointer, pruning and resume lookup for one run."""

    def __init__(self, run_dir: Path | str, keep_last: int = 3, *, durable: bool = True) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1 (got {keep_last}); see [schedule] keep_last")
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / CHECKPOINTS_DIR
        self.keep_last = keep_last
        # durable=False skips fsync (tests, tmpfs); atomicity against a process crash stays.
        self.durable = durable

    # ------------------------------------------------------------------ saving
    def partial_path(self, step: int) -> Path:
        """The work directory of a save of ``step`` (deterministic, so any rank can compute it)."""
        return self.root / f".step_{int(step)}.partial"

    def step_path(self, step: int) -> Path:
        return self.root / f"step_{int(step)}"

    def begin(self, step: int) -> Path:
        """Start saving ``step``: returns an empty work directory to write the checkpoint into.

        Leftovers of crashed saves are removed first (one save runs at a time per run).
        """
        if step < 0:
            raise CheckpointError(f"checkpoint step must be >= 0 (got {step})")
        self.root.mkdir(parents=True, exist_ok=True)
        self.clean_incomplete()
        tmp = self.partial_path(step)
        tmp.mkdir()
        return tmp

    def commit(self, tmp: Path | str, step: int, *, metadata: dict[str, Any] | None = None) -> Path:
        """Make the save in ``tmp`` the checkpoint ``step_N`` and point ``latest`` at it.

        ``metadata`` (JSON-able: config fingerprint, policy version, ...) goes into the
        manifest. Returns the final directory.
        """
        tmp = Path(tmp)
        if tmp != self.partial_path(step):
            raise CheckpointError(
                f"commit({tmp}, step={step}): not the work directory of step {step} "
                f"({self.partial_path(step)}); call begin({step}) and write into what it returns"
            )
        if not tmp.is_dir():
            raise CheckpointError(
                f"commit: {tmp} does not exist (was it committed or cleaned already?)"
            )
        files = {
            str(p.relative_to(tmp)): p.stat().st_size for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        if self.durable:
            fsync_tree(tmp)  # the data must be on disk before the marker says it is complete
        manifest = {
            "step": int(step),
            "time": time.time(),
            "files": files,
            "metadata": metadata or {},
        }
        atomic_write_json(tmp / COMPLETE_MARKER, manifest, durable=self.durable)

        final = self.step_path(step)
        if final.exists():  # saving the same step again (e.g. after a resume): swap it out
            aside = self.root / f".step_{int(step)}.replaced"
            os.rename(final, aside)
            os.rename(tmp, final)
            shutil.rmtree(aside)
        else:
            os.rename(tmp, final)
        if self.durable:
            fsync_dir(self.root)
        atomic_write_text(self.root / LATEST_POINTER, final.name + "\n", durable=self.durable)
        self.prune()
        return final

    def abort(self, tmp: Path | str) -> None:
        """Throw away a save in progress (the trainer failed while writing it)."""
        shutil.rmtree(tmp, ignore_errors=True)

    # ------------------------------------------------------------------ reading
    def checkpoints(self) -> list[CheckpointInfo]:
        """Complete checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for entry in self.root.iterdir():
            match = _STEP_DIR.match(entry.name)
            if match and entry.is_dir():
                manifest = read_manifest(entry)
                if manifest is not None and manifest["step"] == int(match.group(1)):
                    found.append(CheckpointInfo(int(match.group(1)), entry, manifest))
        return sorted(found, key=lambda info: info.step)

    def latest(self) -> Path | None:
        """The checkpoint ``latest`` points to; if the pointer is missing or names an
        incomplete directory, the newest complete checkpoint; ``None`` when there is none."""
        name = self.latest_pointer()
        if _STEP_DIR.match(name) and is_complete(self.root / name):
            return self.root / name
        complete = self.checkpoints()
        return complete[-1].path if complete else None

    def latest_pointer(self) -> str:
        """The name the ``latest`` pointer file holds ("" when there is none)."""
        try:
            return regular_file.read_text(self.root / LATEST_POINTER).strip()
        except (OSError, UnicodeDecodeError):
            return ""

    def fallback_note(self) -> str | None:
        """Why :meth:`latest` is not what the pointer names, or ``None`` when it is."""
        name, found = self.latest_pointer(), self.latest()
        if not name or found is None or found.name == name:
            return None
        why = "is incomplete (an interrupted save)" if (self.root / name).exists() else "is gone"
        return f"{self.root / LATEST_POINTER} names {name}, which {why}: using {found.name}"

    def resolve(self, path: Path | str | None = None) -> Path:
        """The checkpoint to resume from: ``None`` means this run's latest; a path may be a
        checkpoint directory, a ``checkpoints`` directory or a run directory."""
        if path is None:
            found = self.latest()
            if found is None:
                raise CheckpointError(
                    f"no complete checkpoint under {self.root}: nothing to resume; run without "
                    "--resume, or pass --resume PATH to a checkpoint directory"
                )
            return found
        return resolve_checkpoint(Path(path))

    # ------------------------------------------------------------------ housekeeping
    def prune(self) -> list[Path]:
        """Delete complete checkpoints beyond the newest ``keep_last`` (never ``latest``)."""
        complete = self.checkpoints()
        latest = self.latest()
        doomed = [info.path for info in complete[: -self.keep_last] if info.path != latest]
        for path in doomed:
            # Rename first: a crash mid-delete leaves a hidden directory, not a
            # half-deleted step_N that still carries its COMPLETE marker.
            aside = path.with_name(f".{path.name}.deleting")
            os.rename(path, aside)
            shutil.rmtree(aside)
        return doomed

    def clean_incomplete(self) -> list[Path]:
        """Remove work directories left by crashed saves or deletions."""
        if not self.root.is_dir():
            return []
        removed = []
        for entry in self.root.iterdir():
            if _HIDDEN_WORK.match(entry.name) or (
                entry.name.startswith(f".{LATEST_POINTER}.") and entry.name.endswith(".tmp")
            ):
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
        return removed


def resolve_checkpoint(path: Path, *, asked_by: str = "--resume") -> Path:
    """A complete checkpoint directory from a user-given path (``CheckpointManager.resolve``).

    ``asked_by`` starts the error messages: the option or command the path came from.
    """
    if not path.exists():
        raise CheckpointError(f"{asked_by} {path}: no such file or directory")
    if is_complete(path):
        return path
    if _STEP_DIR.match(path.name) or path.name.endswith(".partial"):
        raise CheckpointError(
            f"{asked_by} {path}: this checkpoint is incomplete (no {COMPLETE_MARKER} marker): its "
            "save was interrupted; use an earlier one" + _available(path.parent)
        )
    root = path if path.name == CHECKPOINTS_DIR else path / CHECKPOINTS_DIR
    if root.is_dir():
        found = CheckpointManager(root.parent).latest()
        if found is not None:
            return found
        raise CheckpointError(f"{asked_by} {path}: {root} holds no complete checkpoint")
    raise CheckpointError(
        f"{asked_by} {path}: not a checkpoint (no {COMPLETE_MARKER} marker), nor a run directory "
        f"with a {CHECKPOINTS_DIR}/ folder"
    )


def _available(root: Path) -> str:
    steps = [info.path.name for info in CheckpointManager(root.parent).checkpoints()]
    return f" (complete: {', '.join(steps)})" if steps else " (no complete checkpoint there)"
