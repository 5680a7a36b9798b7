"""Crash-safe file-system primitives: write-then-rename and fsync.

A reader sees either the old or the new content of a path, never a partial one: data is
written to a temporary sibling, flushed to disk, then moved over the target with
``os.replace`` (atomic on POSIX within one file system) and the directory entry fsynced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Persist a directory's entries (a rename is durable only once its directory is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (what a writer left in the page cache)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` atomically (temporary sibling + ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def atomic_write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", durable=durable)
