"""A command in a pseudo-terminal, and the screen a user would see of it (pyte emulates the
terminal: carriage returns, erased lines and cursor moves are applied, not stripped)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import pyte


def run_in_terminal(cmd: Sequence[str], *, cwd: Path, env: dict[str, str], timeout_s: float,
                    columns: int = 120, rows: int = 40) -> tuple[int, bytes]:
    """Run ``cmd`` with stdin, stdout and stderr on one pty of ``columns`` x ``rows``; its exit
    code and every byte it wrote. The whole process tree is killed past ``timeout_s``."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = dict(env, TERM="xterm-256color", COLUMNS=str(columns), LINES=str(rows))
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "CI"):
        env.pop(name, None)  # rich must decide from the terminal alone
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            chunk = b""
            if ready:
                with contextlib.suppress(OSError):  # EIO: every writer closed the pty
                    chunk = os.read(master, 65536)
                out += chunk
            if not chunk and proc.poll() is not None:
                break
        else:
            raise AssertionError(
                f"{cmd} still ran after {timeout_s:.0f} s:\n{out.decode()[-3000:]}")
    finally:
        if proc.poll() is None:
            for p in [*psutil.Process(proc.pid).children(recursive=True), proc]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        proc.wait(timeout=30)
        os.close(master)
    return proc.returncode, bytes(out)


def screen(raw: bytes, *, columns: int = 120) -> list[str]:
    """The lines ``raw`` leaves on a terminal ``columns`` wide (tall enough to keep them all),
    trailing blanks removed."""
    lines = raw.count(b"\n") + len(raw) // columns + 2  # wrapped lines too: nothing scrolls off
    shown = pyte.Screen(columns, lines)
    pyte.ByteStream(shown).feed(raw)
    text = [line.rstrip() for line in shown.display]
    while text and not text[-1]:
        text.pop()
    return text
