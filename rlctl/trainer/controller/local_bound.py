"""A bound on a call that runs in this process (``--local`` mode): :func:`bounded`.

Local mode runs every phase in the controller's own thread so a breakpoint works; a phase
that hangs (an agent loop waiting on a tool, a stuck request) would otherwise hang the run.
A timer thread interrupts the main thread when the bound passes: it delivers ``SIGUSR1``,
whose handler (installed only for the duration of the call) raises :class:`PhaseTimeout`
there. A real signal, not a flag, so a blocking system call (a socket read, a sleep) is
interrupted too. ``PhaseTimeout`` is a ``BaseException`` so ``except Exception`` in the phase
does not swallow it.

While a debugger stops the main thread (a frame on its stack is traced), the bound waits:
sitting at a ``breakpoint()`` is not a hang. Off the main thread (signals cannot be handled
there) the call runs unbounded; the CLI always runs on the main thread.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
_SIGNAL = signal.SIGUSR1


class PhaseTimeout(BaseException):
    """Raised in the main thread when a bounded call passed its bound."""


def bounded(fn: Callable[..., T], timeout_s: float, what: str, /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, interrupted with :class:`PhaseTimeout` after ``timeout_s``."""
    with _deadline(timeout_s, what):
        return fn(*args, **kwargs)


def _debugger_active(thread_id: int) -> bool:
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_trace is not None:
            return True
        frame = frame.f_back
    return False


@contextmanager
def _deadline(timeout_s: float, what: str) -> Iterator[None]:
    main = threading.main_thread()
    if threading.current_thread() is not main:
        yield
        return
    done = threading.Event()
    fired = threading.Event()

    def watch() -> None:
        # Re-check after each period a debugger held the thread; fire once otherwise.
        while not done.wait(timeout_s):
            if _debugger_active(main.ident or 0):
                continue
            fired.set()
            signal.pthread_kill(main.ident or 0, _SIGNAL)
            return

    previous = signal.getsignal(_SIGNAL)

    def on_signal(signum: int, frame: Any) -> None:
        if fired.is_set() and not done.is_set():
            raise PhaseTimeout(f"{what} did not finish within {timeout_s:.0f} s")
        if callable(previous):
            previous(signum, frame)

    signal.signal(_SIGNAL, on_signal)
    timer = threading.Thread(target=watch, name="rlctl-phase-bound", daemon=True)
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.join(timeout=1.0)
        signal.signal(_SIGNAL, previous)
