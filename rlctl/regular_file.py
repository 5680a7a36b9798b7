"""Reading a checkpoint's (or a model directory's) files without hanging on what is not a file.

``open()`` on a FIFO blocks until a writer comes, forever; on a character device it may read
for ever. A checkpoint copied from elsewhere, or built to test rlctl, can hold one where a
JSON file belongs, and ``rlctl export`` once hung on it. Here a file is opened non-blocking
and checked with ``fstat`` on the descriptor actually opened (so a swap between a check and
the open changes nothing), and anything but a regular file is refused, naming it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotARegularFile(OSError):
    """A path that should be a file is a FIFO, a socket, a device or a directory."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Path | str, limit: int | None = None) -> bytes:
    """The bytes of regular file ``path`` (its first ``limit`` bytes, when given: a header);
    :class:`NotARegularFile` for anything else (without blocking), the usual ``OSError`` when
    it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(f"{path} is {_kind(mode)}, not a file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1  # the file object owns it now
            return f.read() if limit is None else f.read(limit)
    finally:
        if fd >= 0:
            os.close(fd)


def read_text(path: Path | str) -> str:
    """:func:`read_bytes` decoded as UTF-8."""
    return read_bytes(path).decode("utf-8")


def not_regular(path: Path | str) -> str | None:
    """Why ``path`` (which exists) is not a regular file, or ``None`` (symlinks followed)."""
    mode = os.stat(path).st_mode
    return None if stat.S_ISREG(mode) else f"{path} is {_kind(mode)}"
