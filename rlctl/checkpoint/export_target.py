"""Where an export may write: never over what it did not write.

An export directory carries a marker file (:data:`EXPORT_MARKER`) so that a later export can
tell its own earlier output from a user's directory. The rules for an output path:

- absent, or an empty directory: written;
- a directory holding a previous export (it has the marker): replaced;
- any other directory: refused, unless the caller asks to overwrite it;
- a file, a symbolic link, or below a file: always refused, and left alone.

The export is written into a fresh hidden sibling (``.<name>.<random>.partial``) and renamed
into place at the end, so a crash leaves the old directory or the new one, never a mix, and
no fixed-name sibling (``<name>.partial``, ``<name>.old``) of the user's is ever touched.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

EXPORT_MARKER = ".rlctl-export.json"


class ExportTargetError(ValueError):
    """The output path holds something an export must not replace."""


def is_export(path: Path) -> bool:
    """Whether ``path`` is a directory an rlctl export wrote (it carries the marker)."""
    return (path / EXPORT_MARKER).is_file() and not (path / EXPORT_MARKER).is_symlink()


def check_export_target(out_dir: Path, *, overwrite: bool = False) -> None:
    """Raise :class:`ExportTargetError` if exporting to ``out_dir`` would lose data."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ExportTargetError(
            f"export target {out_dir} is a symbolic link: pass the path of a directory (an "
            "export replaces a directory, it does not write through links)"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportTargetError(
            f"export target {out_dir} is a file, not a directory: an export writes a "
            "directory; pass a new path (the file is left as it is)"
        )
    for parent in out_dir.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ExportTargetError(
                    f"export target {out_dir}: {parent} is a file, not a directory"
                )
            break
    if not out_dir.exists() or overwrite or is_export(out_dir) or not any(out_dir.iterdir()):
        return
    raise ExportTargetError(
        f"export target {out_dir} exists and holds files that are not an rlctl export (no "
        f"{EXPORT_MARKER}): pass a new or empty directory, or replace it explicitly "
        "(`rlctl export --overwrite`)"
    )


def new_partial_dir(out_dir: Path) -> Path:
    """A fresh, empty hidden work directory next to ``out_dir`` (its name never existed)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.partial")
    partial.mkdir()  # not exist_ok: a clash with anything already there is an error
    return partial


def write_marker(partial: Path, **info: Any) -> None:
    """Mark ``partial`` as an rlctl export (what wrote it and when)."""
    from rlctl import __version__

    record = {"written_by": "rlctl", "version": __version__, "time": time.time(), **info}
    (partial / EXPORT_MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def publish(partial: Path, out_dir: Path, *, overwrite: bool = False) -> None:
    """Move the finished ``partial`` to ``out_dir``, replacing what the rules allow.

    The target is checked again: it may have changed while the export was being written.
    """
    check_export_target(out_dir, overwrite=overwrite)
    if not out_dir.exists():
        os.rename(partial, out_dir)
        return
    aside = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.old")
    os.rename(out_dir, aside)
    try:
        os.rename(partial, out_dir)
    except BaseException:
        os.rename(aside, out_dir)  # put the old one back: the export failed, nothing is lost
        raise
    shutil.rmtree(aside)
