"""A run's claim on its directory: locked, checked, and untouched until the run starts.

:class:`RunDirectory` is entered before any worker starts. It takes the directory's lock
(:mod:`rlctl.run.run_lock`) and refuses a directory the run would damage:

- a fresh run (no ``--resume``, or resuming another directory's checkpoint) into a directory
  that holds a previous run's results: its metrics would be replaced and its checkpoints
  mixed with the new run's. Only what a run
  that never logged a step leaves (``config.toml``, ``run_info.json``, an empty
  ``metrics.jsonl``) may be written over;
- a run whose final HF export would replace an ``hf/`` directory that is not an rlctl export.

The run writes ``config.toml``, ``run_info.json`` and metrics only once its workers are up
and a resume has loaded its checkpoint (it then calls :meth:`RunDirectory.mark_started`). A
run that stops before that leaves the directory as it found it: the lock file and any
directory the claim created are removed again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from rlctl.run.run_lock import LOCK_FILE, RunLock, describe

# What a run that never logged a step leaves behind: written over by the next fresh run.
RESTARTABLE = frozenset({"config.toml", "run_info.json"})
EMPTY_OK = frozenset({"metrics.jsonl"})
HF_EXPORT_DIR = "hf"


class RunDirError(ValueError):
    """The run must not use this directory (exit 2; nothing was changed)."""


def previous_run_entries(run_dir: Path) -> list[str]:
    """Entries of ``run_dir`` that a fresh run would overwrite or mix with its own."""
    found = []
    for entry in sorted(run_dir.iterdir()):
        name = entry.name
        if name == LOCK_FILE:
            continue
        plain_file = entry.is_file() and not entry.is_symlink()
        if plain_file and (name in RESTARTABLE or (name in EMPTY_OK and entry.stat().st_size == 0)):
            continue
        found.append(name + "/" if entry.is_dir() else name)
    return found


class RunDirectory:
    """``with RunDirectory(run_dir, resume=...) as claim:`` around the whole run.

    ``resume``: the run continues the run in this directory (from one of its checkpoints);
    a resume from another run's checkpoint starts this directory afresh.
    """

    def __init__(self, run_dir: Path, *, resume: bool) -> None:
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.lock: RunLock | None = None
        self.started = False
        self.notes: list[str] = []
        """Things the user should know (a lock taken over from a killed run, no locking)."""
        self._created: list[Path] = []  # directories the claim made, outermost first

    def __enter__(self) -> Self:
        try:
            self._claim()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._release()

    def mark_started(self) -> None:
        """The run is known to start: from now on what it writes stays."""
        self.started = True

    def _claim(self) -> None:
        run_dir = self.run_dir
        if run_dir.exists() and not run_dir.is_dir():
            raise RunDirError(
                f"run directory {run_dir} is a file: set run.name or run.output_dir to a "
                "directory path"
            )
        missing = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
        run_dir.mkdir(parents=True, exist_ok=True)
        self._created = list(reversed(missing))
        self.lock = RunLock.acquire(run_dir)
        if self.lock.warning:
            self.notes.append(self.lock.warning)
        if self.lock.previous:
            self.notes.append(
                f"took over the lock of a run that is gone ({describe(self.lock.previous)})"
            )
        if not self.resume:
            entries = previous_run_entries(run_dir)
            if entries:
                shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
                raise RunDirError(
                    f"run directory {run_dir} already holds a run ({shown}): a run that does not "
                    "continue it would replace its metrics; continue it with --resume, or train "
                    "under another run.name or run.output_dir (nothing was changed)"
                )
        self._check_hf_export()

    def _check_hf_export(self) -> None:
        from rlctl.checkpoint.export_target import ExportTargetError, check_export_target

        target = self.run_dir / HF_EXPORT_DIR
        try:
            check_export_target(target)
        except ExportTargetError as exc:
            raise RunDirError(
                f"{exc}; the run writes its final HF export to {target}: move that away first "
                "(nothing was changed)"
            ) from None

    def _release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if not self.started:
            # A run that never started leaves no trace: remove the (empty) directories the
            # claim made, innermost first; rmdir refuses any that something wrote into.
            for path in reversed(self._created):
                try:
                    path.rmdir()
                except OSError:
                    break
        self._created = []
