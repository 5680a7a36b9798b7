"""SIGTERM stops a run the way Ctrl-C does: the same orderly shutdown, then exit 143.

Without this, SIGTERM (``kill``, a scheduler's stop, a container's stop) meets the handler
Ray's C++ core installs in the driver: it prints a stack dump and aborts (exit 134), leaving
workers and the run lock to be cleaned up by others. Here it raises :class:`Terminated`
(a ``KeyboardInterrupt``) in the main thread, so every ``finally`` and context manager runs:
workers stop, Ray shuts down, the lock is released.

When the signal lands while an asyncio loop runs in the main thread (the ``--local`` rollout
worker drives its sessions with one), raising in place would raise inside whichever task
was running: asyncio re-raises a ``KeyboardInterrupt`` from every task it passes through,
also while ``asyncio.run`` cancels the others on the way out, and logs it with a traceback
as an unhandled task exception. So there the handler asks the loop to raise it at its next
turn instead (``call_soon_threadsafe``, which also wakes a loop parked in ``select``; asyncio's
own Ctrl-C handler calls it from a signal handler the same way): the exception leaves
``asyncio.run`` from the loop itself and every task is cancelled cleanly. A loop can close
before that turn (the signal came during its very last one): a timer thread then sends the
signal again, and the handler, finding no loop, raises in place.

``ray.init`` replaces whatever SIGTERM handler is installed, so the session calls
:func:`reinstall` once Ray is up.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any, Self

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, the shell's code for "ended by SIGTERM"


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM; unwinds like Ctrl-C."""


class StopOnSigterm:
    """``with StopOnSigterm() as stop:`` turns SIGTERM into :class:`Terminated` inside.

    Only the first SIGTERM raises: later ones (a supervisor that repeats it) must not cut
    the shutdown short. A no-op outside the main thread (Python delivers signals there only).
    """

    # How long a loop has to raise a deferred Terminated before the signal is sent again.
    REDELIVER_S = 0.5

    def __init__(self) -> None:
        self.received = False
        self._deferred = False  # received inside a loop, not raised yet
        self._armed = False  # a redelivery timer is pending
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> Self:
        global _active
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
            _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        if self._installed:
            # first, so that a pending redelivery sends nothing to the handler restored next
            self._installed = False
            self._deferred = False  # the block is over: nothing is left to unwind
            signal.signal(signal.SIGTERM, self._previous)
            if _active is self:
                _active = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received and not self._deferred:
            return
        self.received = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: unwind from right here
            self._deferred = False
            raise Terminated() from None
        self._deferred = True
        loop.call_soon_threadsafe(self._raise_deferred)
        if not self._armed:
            self._armed = True
            timer = threading.Timer(self.REDELIVER_S, self._redeliver)
            timer.daemon = True
            timer.start()

    def _raise_deferred(self) -> None:
        if self._deferred:  # once, however many loops were asked
            self._deferred = False
            raise Terminated()

    def _redeliver(self) -> None:
        """Timer thread: no loop raised it in time; signal the main thread again (the handler
        then raises in place, or asks the loop running by then)."""
        self._armed = False
        if self._deferred and self._installed:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)


_active: StopOnSigterm | None = None


def reinstall() -> None:
    """Put the active :class:`StopOnSigterm` handler back (after ``ray.init`` replaced it)."""
    if _active is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _active._handle)


def terminated() -> bool:
    """Whether the active run got SIGTERM (a failure that follows is its consequence)."""
    return _active is not None and _active.received
