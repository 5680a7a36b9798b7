"""The training progress bar: step, reward, step time, ETA (rich).

The bar is drawn on stderr, and its console is the run's console while it is drawn
(:func:`rlctl.sinks.console.drawing_on`): step lines, warnings and the summary printed through
:func:`rlctl.sinks.console.console_for` land above the bar instead of across it.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Self


class StepProgress:
    """A rich progress bar on stderr; a no-op when disabled (``--quiet``). Off a terminal rich
    draws nothing live and prints the final bar once, when the block ends."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        self._drawn = ExitStack()

    def __enter__(self) -> Self:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            from rlctl.sinks.console import drawing_on

            self._progress = Progress(
                TextColumn("[bold]step"),
                MofNCompleteColumn(),
                BarColumn(),
                TextColumn("reward {task.fields[reward]}"),
                TextColumn("{task.fields[step_s]} s/step"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._drawn.enter_context(drawing_on(self._progress.console))
            self._progress.__enter__()
            self._task = self._progress.add_task("train", total=self.total, reward="-", step_s="-")
        return self

    def advance(self, step: int, metrics: dict[str, float]) -> None:
        if self._progress is None:
            return
        reward = metrics.get("critic/score/mean")
        step_s = metrics.get("timing_s/step")
        self._progress.update(
            self._task,
            completed=step,
            reward=f"{reward:.3f}" if reward is not None else "-",
            step_s=f"{step_s:.2f}" if step_s is not None else "-",
        )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
        self._drawn.close()
