"""The ``jsonl`` sink: ``<run_dir>/metrics.jsonl``, one JSON object per step.

Each line is ``{"step": N, "time": <unix seconds>, "<metric>": value, ...}``; non-finite
values are written as ``null`` (JSON has no NaN). The file is the source of truth for
``rlctl report`` and ``rlctl runs list``.

Resume: a run killed after logging step 7 and resumed from a checkpoint at step 5 logs
steps 6 and 7 again. On its first ``log(step)`` the sink therefore drops every line whose
step is >= ``step`` (rewriting the file atomically), so the file always reads like one
uninterrupted run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from rlctl.sinks.options import JsonlSinkOptions
from rlctl.sinks.scalars import json_number, scalar_metrics


class JsonlSink:
    """Appends one JSON line per step to ``<run_dir>/<filename>``."""

    def __init__(self, path: Path, *, flush_every: int = 1) -> None:
        self.path = path
        self.flush_every = flush_every
        self._file: IO[str] | None = None
        self._since_flush = 0

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._file is None:
            self._open(first_step=int(step))
        assert self._file is not None
        record: dict[str, Any] = {"step": int(step), "time": time.time()}
        for name, value in scalar_metrics(metrics).items():
            if name not in ("step", "time"):  # the two reserved keys are ours
                record[name] = json_number(value)
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._since_flush += 1
        if self._since_flush >= self.flush_every:
            self._file.flush()
            self._since_flush = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, *, first_step: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            drop_steps_from(self.path, first_step)
        self._file = self.path.open("a", encoding="utf-8")


def drop_steps_from(path: Path, step: int) -> int:
    """Remove the lines of ``path`` whose step is >= ``step``; returns how many went.

    Unparseable lines (a line cut short by a crash) are dropped too. The file is
    rewritten through a temporary file and ``os.replace``, so a crash here leaves either
    the old or the new file, never a mix.
    """
    kept: list[str] = []
    dropped = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                record_step = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError):
                dropped += 1
                continue
            if record_step >= step:
                dropped += 1
            else:
                kept.append(line if line.endswith("\n") else line + "\n")
    if dropped:
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(kept)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return dropped


def make_jsonl_sink(options: JsonlSinkOptions, *, run_dir: Path) -> JsonlSink:
    """Factory registered as ``jsonl``."""
    return JsonlSink(Path(run_dir) / options.filename, flush_every=options.flush_every)
