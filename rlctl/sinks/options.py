"""Option models of the built-in metric sinks (``[logging.sink_options.<name>]``).

Pure pydantic: the registration module imports these, so nothing heavy may be imported here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG


class SinkOptions(BaseModel):
    """Base of every sink option model: strict and immutable."""

    model_config = STRICT_CONFIG


# The metrics a compact console line shows by default, with their short labels. Names
# follow verl's so that curves compare across frameworks.
DEFAULT_CONSOLE_KEYS: dict[str, str] = {
    "critic/score/mean": "score",
    "val/score/mean": "val",
    "actor/pg_loss": "pg_loss",
    "actor/kl": "kl",
    "actor/entropy": "entropy",
    "response_length/mean": "len",
    "timing_s/step": "step_s",
}


class ConsoleSinkOptions(SinkOptions):
    keys: dict[str, str] = DEFAULT_CONSOLE_KEYS
    """Metrics shown on the line, mapped to their short labels; absent metrics are skipped."""
    all_metrics: bool = False
    """Show every metric of the step instead of ``keys`` (long lines)."""
    every: PositiveInt = 1
    """Print one line every N steps."""
    stream: Literal["stdout", "stderr"] = "stdout"
    """Where the lines go."""
    precision: int = Field(4, ge=1, le=12)
    """Significant digits of each value."""


class JsonlSinkOptions(SinkOptions):
    filename: str = Field("metrics.jsonl", pattern=r"^[^/\\]+$")
    """File name inside the run directory."""
    flush_every: PositiveInt = 1
    """Flush to disk every N steps (1: a crash loses no logged step)."""


class TensorBoardSinkOptions(SinkOptions):
    log_dir: str = "tensorboard"
    """Event-file directory, relative to the run directory (or absolute)."""
    flush_secs: PositiveInt = 10
    """Seconds between background flushes of the event file."""


class WandbSinkOptions(SinkOptions):
    project: str = "rlctl"
    """Weights & Biases project."""
    entity: str | None = None
    """Team or user; ``None`` uses the logged-in default."""
    name: str | None = None
    """Run name; ``None`` uses the run directory's name."""
    group: str | None = None
    """Group runs together in the UI."""
    tags: list[str] = []
    """Tags attached to the run."""
    mode: Literal["online", "offline", "disabled"] = "online"
    """``offline`` writes locally (``wandb sync`` later); ``disabled`` logs nothing."""


class MlflowSinkOptions(SinkOptions):
    tracking_uri: str | None = None
    """Tracking server or store; ``None`` writes a SQLite store ``<run_dir>/mlflow.db``."""
    experiment: str = "rlctl"
    """Experiment the run belongs to."""
    run_name: str | None = None
    """Run name; ``None`` uses the run directory's name."""
