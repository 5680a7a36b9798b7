"""``<run_dir>/run.log``: what a run told its user while it trained, kept with the run.

Metrics go to the sinks; this file keeps the messages about the run that a user must not
miss and that scroll away on a console: each step's episode notes (a tool that raised: the
tool, its plugin, the exception and ``file:line``). Every line is printed on stderr as a
warning and appended here with the time and the step, so ``cat runs/x/run.log`` after the
fact shows what the console showed.
"""

from __future__ import annotations

import time
from pathlib import Path

RUN_LOG = "run.log"


class RunLog:
    """Warnings of one run: on stderr, and appended to ``<run_dir>/run.log``."""

    def __init__(self, run_dir: Path, *, quiet: bool = False) -> None:
        self.path = Path(run_dir) / RUN_LOG
        self.quiet = quiet

    def warn(self, message: str, *, step: int | None = None) -> None:
        """Print ``warning: step N: message`` (unless quiet) and append it to the file."""
        text = f"step {step}: {message}" if step is not None else message
        if not self.quiet:
            from rich.markup import escape

            from rlctl.sinks.console import console_for

            # soft_wrap: the message stays one greppable line; escape: it holds user text
            console_for("stderr").print(
                f"[yellow]warning:[/yellow] {escape(text)}", highlight=False, soft_wrap=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(f"{stamp} warning: {text}\n")
        except OSError:
            pass  # a full disk must not stop training over a log line; stderr has it
