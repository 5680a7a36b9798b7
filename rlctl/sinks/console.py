"""The ``console`` sink: one compact rich line per step.

``step 12 │ score 0.531 │ kl 0.0012 │ entropy 1.23 │ len 7.5 │ step_s 1.42``

It prints through rich's shared console, so lines land above a live progress bar instead
of breaking it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from rlctl.sinks.options import ConsoleSinkOptions
from rlctl.sinks.scalars import scalar_metrics


class ConsoleSink:
    """Prints a compact line of selected metrics every ``every`` steps."""

    def __init__(self, options: ConsoleSinkOptions, console: Console | None = None) -> None:
        self.options = options
        if console is None:
            from rich import get_console

            console = Console(stderr=True) if options.stream == "stderr" else get_console()
        self.console = console

    def format_line(self, step: int, metrics: Mapping[str, Any]) -> Text:
        values = scalar_metrics(metrics)
        if self.options.all_metrics:
            shown = [(name, values[name]) for name in sorted(values)]
        else:
            shown = [
                (label, values[name]) for name, label in self.options.keys.items() if name in values
            ]
        line = Text(f"step {step}", style="bold")
        for label, value in shown:
            line.append(" │ ", style="dim")
            line.append(f"{label} ", style="cyan")
            line.append(f"{value:.{self.options.precision}g}")
        return line

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        if step % self.options.every == 0:
            self.console.print(self.format_line(step, metrics), soft_wrap=True, highlight=False)

    def close(self) -> None:
        """Nothing to release: the console belongs to rich."""


def make_console_sink(options: ConsoleSinkOptions, *, run_dir: Path) -> ConsoleSink:
    """Factory registered as ``console`` (``run_dir`` is unused: it writes no file)."""
    return ConsoleSink(options)
