"""The ``console`` sink: one compact rich line per step, and the console a run prints on.

``step 12 │ score 0.531 │ kl 0.0012 │ entropy 1.23 │ len 7.5 │ step_s 1.42``

Every human line a run prints (step lines, warnings, the end-of-run summary) goes through
:func:`console_for`. While a progress bar is drawn on a terminal (:func:`drawing_on`), a line
for a stream that is a terminal too is printed through the bar's own console: rich then
clears the bar, prints the line and draws the bar again below it. A line printed through any
other console (rich's stdout console, a fresh stderr one) lands on the bar's row and the two
write over each other (rich's consoles bypass the stream proxy a live display installs).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.text import Text

from rlctl.sinks.options import ConsoleSinkOptions
from rlctl.sinks.scalars import scalar_metrics

Stream = Literal["stdout", "stderr"]

# The console a live display (the progress bar) is drawn on, while it is drawn. A terminal
# is one per process, as is rich's own default console: this is process-wide on purpose.
_drawn_on: list[Console] = []


@contextmanager
def drawing_on(console: Console) -> Iterator[Console]:
    """Mark ``console`` as the one a live display is drawn on for the block."""
    _drawn_on.append(console)
    try:
        yield console
    finally:
        _drawn_on.remove(console)


def console_for(stream: Stream = "stderr") -> Console:
    """The console to print a human line for ``stream`` on: the live display's console when
    one is drawn on a terminal and ``stream`` is a terminal too (one screen: only its own
    console prints above the display), else a console on ``stream`` itself."""
    own = Console(stderr=stream == "stderr")
    if _drawn_on and _drawn_on[-1].is_terminal and own.is_terminal:
        return _drawn_on[-1]
    if stream == "stdout":
        from rich import get_console

        return get_console()  # rich's default console: what rich.print and others share
    return own


class ConsoleSink:
    """Prints a compact line of selected metrics every ``every`` steps."""

    def __init__(self, options: ConsoleSinkOptions, console: Console | None = None) -> None:
        """``console``: where every line goes (tests); ``None``: :func:`console_for` the
        option's ``stream``, asked at each line (a progress bar may start or stop between)."""
        self.options = options
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
            console = self.console or console_for(self.options.stream)
            console.print(self.format_line(step, metrics), soft_wrap=True, highlight=False)

    def close(self) -> None:
        """Nothing to release: the console belongs to rich."""


def make_console_sink(options: ConsoleSinkOptions, *, run_dir: Path) -> ConsoleSink:
    """Factory registered as ``console`` (``run_dir`` is unused: it writes no file)."""
    return ConsoleSink(options)
