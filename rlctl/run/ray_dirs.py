"""Where a locally started Ray cluster keeps its files: a private directory per user and run.

``<system temp>/rlctl-ray-<uid>/`` (mode 0700, owned by this user, not a link) holds one
directory per run (``r<random>/``, Ray's ``_temp_dir``: sockets, logs, object spill) and next
to it that run's lock file (``r<random>.lock``), locked (``flock``) for as long as the run's
process lives. A run directory whose lock nobody holds belongs to a run that has ended, killed
or not: :func:`clean_stale_runs` deletes it. Only entries of that shape are touched, so nothing
rlctl did not make is removed, and a run still going (its lock is held) is never touched.

The base path stays short on purpose: Ray's unix sockets live below it and a socket path may
not exceed 107 bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_RUN_DIR = re.compile(r"^r[a-z0-9_]{8}$")
_UNLOCKED_GRACE_S = 60.0


class RayDirError(RuntimeError):
    """The private Ray directory is not safe to use (someone else's, a link, too open)."""


def private_base(root: str | os.PathLike[str] | None = None) -> Path:
    """``<root>/rlctl-ray-<uid>``, created 0700; refuses one that another user could reach."""
    root = Path(root or tempfile.gettempdir())
    base = root / f"rlctl-ray-{os.getuid()}"
    try:
        base.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = base.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise RayDirError(
            f"{base} is not a directory (a link or a file): remove it, rlctl makes its own")
    if info.st_uid != os.getuid():
        raise RayDirError(
            f"{base} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}): remove it or "
            "set TMPDIR to a directory of your own")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(base, 0o700)  # ours but too open (made by an older rlctl or by hand)
    return base


@dataclass
class RunDir:
    """One run's Ray directory and the lock that marks it in use."""

    path: Path
    lock_fd: int

    def release(self, *, remove: bool = True) -> None:
        """Unlock (and by default delete) the run directory; idempotent."""
        if self.lock_fd < 0:
            return
        if remove:
            shutil.rmtree(self.path, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                self.path.with_name(self.path.name + ".lock").unlink()
        os.close(self.lock_fd)
        self.lock_fd = -1


def new_run_dir(base: Path) -> RunDir:
    """A fresh ``r<random>/`` in ``base`` whose lock this process holds."""
    path = Path(tempfile.mkdtemp(prefix="r", dir=base))
    # mkdtemp names are 8 random characters: that is what _RUN_DIR expects.
    fd = os.open(path.with_name(path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return RunDir(path, fd)


def clean_stale_runs(base: Path) -> list[Path]:
    """Delete the run directories in ``base`` whose lock is not held; returns what was removed."""
    removed = []
    for entry in sorted(base.iterdir()):
        if not _RUN_DIR.match(entry.name) or entry.is_symlink() or not entry.is_dir():
            continue
        lock = entry.with_name(entry.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            # No lock file: a run that is starting this instant (it makes the directory, then
            # the lock), or leftovers a Ray process wrote after its run removed both.
            if time.time() - entry.stat().st_mtime > _UNLOCKED_GRACE_S:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
            continue
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use
            shutil.rmtree(entry, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            removed.append(entry)
        finally:
            os.close(fd)
    return removed
