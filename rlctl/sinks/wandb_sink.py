"""The ``wandb`` sink (Weights & Biases). Loaded only when selected; needs ``pip install wandb``.

The wandb run id is kept in ``<run_dir>/wandb_run_id`` so that a resumed rlctl run keeps
logging into the same wandb run.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlctl.sinks.options import WandbSinkOptions
from rlctl.sinks.protocol import SinkNotInstalledError
from rlctl.sinks.scalars import scalar_metrics

RUN_ID_FILE = "wandb_run_id"


class WandbSink:
    """Logs each step with ``run.log(metrics, step=step)``."""

    def __init__(self, options: WandbSinkOptions, run_dir: Path) -> None:
        try:
            wandb = importlib.import_module("wandb")
        except ImportError as exc:
            raise SinkNotInstalledError("wandb", "wandb") from exc
        run_dir.mkdir(parents=True, exist_ok=True)
        id_file = run_dir / RUN_ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:16]
        id_file.write_text(run_id + "\n")
        self._run = wandb.init(
            project=options.project,
            entity=options.entity,
            name=options.name or run_dir.name,
            group=options.group,
            tags=list(options.tags) or None,
            mode=options.mode,
            dir=str(run_dir),
            id=run_id,
            resume="allow",
        )

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        self._run.log(scalar_metrics(metrics), step=int(step))

    def close(self) -> None:
        self._run.finish()


def make_wandb_sink(options: WandbSinkOptions, *, run_dir: Path) -> WandbSink:
    """Factory registered as ``wandb``."""
    return WandbSink(options, Path(run_dir))
