"""One run at a time in a run directory: an exclusive lock held for the whole run.

The lock is ``flock`` on ``<run_dir>/.rlctl.lock``. The kernel drops it when its process
ends, however it ends, so the lock of a killed run is free: the next run takes it over (and
says whose it was). The file records the holder (pid, host, start time, command) so that a
refused run can say who holds the directory.

fcntl rather than the ``filelock`` package: the holder's record lives in the lock file, and
filelock 3.x truncates the lock file on every attempt to take it (a refused run would wipe
the record); the hook that would let us write it exists only from 4.x, and filelock comes to
us as a dependency of torch and Ray, in whatever version they pull.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = ".rlctl.lock"
CHECKPOINTS_DIR = "checkpoints"  # rlctl.checkpoint.manager's: a run directory's layout
# flock is missing on some network file systems: the run goes on unlocked, with a warning.
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS}


class RunLockedError(RuntimeError):
    """Another live process holds the run directory."""

    def __init__(self, run_dir: Path, holder: dict[str, Any] | None) -> None:
        self.run_dir = run_dir
        self.holder = holder
        super().__init__(
            f"run directory {run_dir} is in use by another run ({describe(holder)}): wait for it "
            "to finish, or train under another run.name or run.output_dir"
        )


def describe(holder: dict[str, Any] | None) -> str:
    """``pid 123 on host h, started 2026-01-02 10:00:00, `rlctl train x.toml```."""
    if not holder:
        return "no record of the holder"
    parts = [f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"]
    if isinstance(holder.get("started"), (int, float)):
        parts.append(
            "started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["started"]))
        )
    if holder.get("command"):
        parts.append(f"`{holder['command']}`")
    return ", ".join(parts)


@dataclass
class RunLock:
    """A held lock; :meth:`release` removes the lock file and frees it."""

    path: Path
    fd: int | None
    previous: dict[str, Any] | None
    """The record left by an earlier holder that is gone (a killed run), if any."""
    warning: str | None = None

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Take the lock of ``run_dir`` (which must exist) or raise :class:`RunLockedError`."""
        path = Path(run_dir) / LOCK_FILE
        for _ in range(100):  # another loop only when a holder removed the file under us
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_record(fd)
                os.close(fd)
                raise RunLockedError(Path(run_dir), holder) from None
            except OSError as exc:
                if exc.errno not in _NO_LOCKS:
                    os.close(fd)
                    raise
                os.close(fd)
                path.unlink(missing_ok=True)
                return cls(path, None, None, warning=(
                    f"cannot lock {path} ({exc.strerror}): the file system has no locks, so "
                    "nothing stops a second run from using this directory at the same time"))
            except BaseException:
                os.close(fd)
                raise
            # A holder that finished unlinked the file after we opened it: our inode is no
            # longer the lock, and a third run may lock the new file. Start again on it.
            try:
                current = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            if current is None or not os.path.samestat(current, os.fstat(fd)):
                os.close(fd)
                continue
            previous = _read_record(fd)
            _write_record(fd)
            return cls(path, fd, previous)
        raise RuntimeError(f"could not take the lock {path}: it keeps being replaced")

    def release(self) -> None:
        """Remove the lock file, then free the lock (in that order: see :meth:`acquire`)."""
        if self.fd is None:
            return
        try:
            current = os.stat(self.path, follow_symlinks=False)
            if os.path.samestat(current, os.fstat(self.fd)):
                self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(self.fd)
            self.fd = None


def holder_of(run_dir: Path) -> dict[str, Any] | None:
    """The record of the live run that holds ``run_dir``'s lock (``{}`` when it left none),
    or ``None`` when no run holds it. Never blocks; takes nothing but a shared lock for the
    moment of the probe (a run starting in that same instant is refused, and can retry)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file (or not one rlctl made): no run holds the directory
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_record(fd) or {}
        except OSError:
            return None  # no locks on this file system: nothing can be told
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def training_run(path: Path) -> tuple[Path, dict[str, Any]] | None:
    """``(run directory, holder)`` when ``path`` (a run directory, its ``checkpoints/`` or a
    checkpoint in it) belongs to a run that is still training; else ``None``."""
    path = Path(path)
    if path.name == CHECKPOINTS_DIR:
        run_dir = path.parent
    elif path.parent.name == CHECKPOINTS_DIR:
        run_dir = path.parent.parent
    else:
        run_dir = path
    holder = holder_of(run_dir)
    return None if holder is None else (run_dir, holder)


def still_training(run_dir: Path, holder: dict[str, Any]) -> str:
    """The message for a command refused because ``run_dir`` is still training."""
    return (f"the run in {run_dir} is still training ({describe(holder)}): its checkpoints "
            "are rotated while it runs; wait for it to finish (or stop it), then try again")


def _read_record(fd: int) -> dict[str, Any] | None:
    try:
        raw = os.pread(fd, 64 * 1024, 0)
        record = json.loads(raw.decode("utf-8")) if raw.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _command() -> str:
    if not sys.argv:
        return ""
    # `rlctl ...` and `python -m rlctl ...` (argv[0] is rlctl/__main__.py) both read as rlctl
    first = Path(sys.argv[0])
    prog = "rlctl" if first.name == "rlctl" or first.parent.name == "rlctl" else first.name
    return shlex.join([prog, *sys.argv[1:]])


def _write_record(fd: int) -> None:
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "command": _command(),
    }
    data = (json.dumps(record) + "\n").encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
