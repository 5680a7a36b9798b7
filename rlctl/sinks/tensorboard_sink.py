"""The ``tensorboard`` sink: scalar event files under ``<run_dir>/tensorboard``.

Uses torch's ``SummaryWriter`` (scalars as ``simple_value``, which every TensorBoard
version and ``EventAccumulator.Scalars`` read). Imported only when the sink is selected.

Resume: the writer opens on the first ``log(step)`` with ``purge_step=step`` when event
files already exist, so TensorBoard hides the steps a killed run logged after its last
checkpoint (the same rule as the ``jsonl`` sink).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlctl.sinks.options import TensorBoardSinkOptions
from rlctl.sinks.protocol import SinkNotInstalledError
from rlctl.sinks.scalars import scalar_metrics


class TensorBoardSink:
    """Writes every scalar metric with ``add_scalar(name, value, step)``."""

    def __init__(self, log_dir: Path, *, flush_secs: int = 10) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # torch present, tensorboard missing
            raise SinkNotInstalledError("tensorboard", "tensorboard") from exc
        self._writer_class = SummaryWriter
        self.log_dir = log_dir
        self.flush_secs = flush_secs
        self._writer: Any = None

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._writer is None:
            self._writer = self._open(first_step=int(step))
        for name, value in scalar_metrics(metrics).items():
            # TensorBoard plots NaN as a gap, which is what we want; inf would squash the axis.
            if not math.isinf(value):
                self._writer.add_scalar(name, value, global_step=int(step))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _open(self, *, first_step: int) -> Any:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        resumed = any(self.log_dir.glob("events.out.tfevents.*"))
        return self._writer_class(
            log_dir=str(self.log_dir),
            flush_secs=self.flush_secs,
            purge_step=first_step if resumed else None,
        )


def make_tensorboard_sink(options: TensorBoardSinkOptions, *, run_dir: Path) -> TensorBoardSink:
    """Factory registered as ``tensorboard``."""
    log_dir = Path(options.log_dir)
    if not log_dir.is_absolute():
        log_dir = Path(run_dir) / log_dir
    return TensorBoardSink(log_dir, flush_secs=options.flush_secs)
