"""What ``rlctl train`` prints when a run completes: where it is and how it went.

::

    done: 3 steps (1-3) in 41.2 s
      run dir     runs/tiny-grpo
      metrics     runs/tiny-grpo/metrics.jsonl
      checkpoint  runs/tiny-grpo/checkpoints/step_3
      model       runs/tiny-grpo/hf
      reward      0.0113 -> 0.876 (critic/score/mean, step 1 -> 3)
      plot        rlctl report runs/tiny-grpo

Paths are as the recipe gives them (``run.output_dir`` is often relative), so each line can
be pasted from the directory ``rlctl train`` ran in. Lines about what the run did not make
(no ``jsonl`` sink, no checkpoint, no score) are left out; ``plot`` needs the metrics under
their default name, which ``rlctl report`` reads.
"""

from __future__ import annotations

import datetime
import math
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl.inspect.run_metrics import METRICS_FILE
from rlctl.inspect.run_metrics import REWARD as REWARD_METRIC
from rlctl.sinks.scalars import to_float


@dataclass
class RunSummary:
    """Collects a run's steps as they are logged; :meth:`lines` says how it went."""

    run_dir: Path
    metrics_file: Path | None = None
    """``metrics.jsonl`` of the run (``None`` without the ``jsonl`` sink)."""
    started: float = field(default_factory=time.monotonic)
    steps: list[int] = field(default_factory=list)
    rewards: list[tuple[int, float]] = field(default_factory=list)
    checkpoint: Path | None = None
    model: Path | None = None

    def record(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One logged step (its reward when it has a finite one)."""
        self.steps.append(step)
        reward = to_float(metrics.get(REWARD_METRIC))
        if reward is not None and math.isfinite(reward):
            self.rewards.append((step, reward))

    def lines(self, *, now: float | None = None) -> list[str]:
        wall = (time.monotonic() if now is None else now) - self.started
        count = len(self.steps)
        span = f" ({self.steps[0]}-{self.steps[-1]})" if count else ""
        head = f"done: {count} step{'' if count == 1 else 's'}{span} in {_duration(wall)}"
        rows: list[tuple[str, str]] = [("run dir", str(self.run_dir))]
        if self.metrics_file is not None:
            rows.append(("metrics", str(self.metrics_file)))
        if self.checkpoint is not None:
            rows.append(("checkpoint", str(self.checkpoint)))
        if self.model is not None:
            rows.append(("model", str(self.model)))
        if self.rewards:
            (first_step, first), (last_step, last) = self.rewards[0], self.rewards[-1]
            span = f"step {first_step} -> {last_step}"
            rows.append(("reward", f"{first:.4g} -> {last:.4g} ({REWARD_METRIC}, {span})"))
        if self.metrics_file is not None and self.metrics_file.name == METRICS_FILE:
            rows.append(("plot", f"rlctl report {shlex.quote(str(self.run_dir))}"))
        width = max(len(label) for label, _ in rows)
        return [head, *(f"  {label.ljust(width)}  {value}" for label, value in rows)]

    def show(self) -> None:
        """Print :meth:`lines` on stderr (through the run's console, see
        :func:`rlctl.sinks.console.console_for`)."""
        from rich.markup import escape

        from rlctl.sinks.console import console_for

        console = console_for("stderr")
        for line in self.lines():  # escape: paths are user text, "[x]" is not markup
            console.print(escape(line), highlight=False, soft_wrap=True)


def _duration(seconds: float) -> str:
    """``41.2 s`` under a minute, else ``0:12:03``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return str(datetime.timedelta(seconds=round(seconds)))
