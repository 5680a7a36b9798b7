"""Which of a run's own servers still run after it ended.

A machine-wide ``pgrep -f vllm.entrypoints...`` also finds servers that are none of the run's
business: another test's (a second pytest-xdist worker's) or another user's. A server's log
starts with the command it was started with (``$ <argv>``, :class:`ServerProcess.start`), and
its argv names the run's own model directory (a fresh temporary one): a live process with
exactly that command line is one of this run's servers.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

import psutil


def logged_commands(log_dir: Path) -> list[list[str]]:
    """The argv of every server start written to the logs in ``log_dir``."""
    commands = []
    for log in sorted(log_dir.glob("*.log")):
        with log.open(errors="replace") as f:
            commands += [shlex.split(line[2:]) for line in f if line.startswith("$ ")]
    return commands


def servers_left_running(log_dir: Path) -> list[str]:
    """``pid: command`` of each live process that runs a command logged in ``log_dir``."""
    commands = logged_commands(log_dir)
    assert commands, f"no server start logged in {log_dir}: the check would find nothing"
    wanted = {tuple(c) for c in commands}
    left = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            cmdline = tuple(proc.info["cmdline"] or ())
            if cmdline in wanted and proc.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{proc.info['pid']}: {shlex.join(cmdline)}")
    return left
