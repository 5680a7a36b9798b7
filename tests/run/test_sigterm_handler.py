"""SIGTERM becomes one clean ``Terminated``, with or without an event loop running.

CI once caught SIGTERM while the ``--local`` rollout worker decoded a response inside one of
its session tasks: the run stopped with exit 143 as it should, but the exception had been
raised inside the task, so asyncio re-raised it while cancelling the other sessions and
logged it with a traceback as an unhandled task exception.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading
import time

import pytest

from rlctl.run.signals import StopOnSigterm, Terminated


def _asyncio_errors(caplog) -> list[str]:
    gc.collect()  # "Task was destroyed but it is pending!" is reported when a task is freed
    return [r.getMessage() for r in caplog.records
            if r.name == "asyncio" and r.levelno >= logging.ERROR]


def test_outside_a_loop_it_raises_in_place():
    with StopOnSigterm() as stop, pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10**8):  # the handler runs between two bytecodes of this loop
            pass
    assert stop.received


def test_inside_a_task_it_leaves_asyncio_run_once_and_every_task_is_cancelled(caplog):
    caplog.set_level(logging.DEBUG, logger="asyncio")
    cancelled = []

    async def session(i: int) -> None:
        try:
            await asyncio.sleep(0.01 * i)
            if i == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # lands inside this task's step
                sum(range(10**6))
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def group(g: int) -> None:
        await asyncio.gather(*(session(4 * g + i) for i in range(4)))

    async def main() -> None:
        await asyncio.gather(group(0), group(1))

    with StopOnSigterm(), pytest.raises(Terminated):
        asyncio.run(main())
    assert sorted(cancelled) == list(range(8))  # none finished, none left pending
    assert _asyncio_errors(caplog) == []


def test_a_loop_parked_in_select_wakes_up_for_it(caplog):
    """Nothing runs in the loop when the signal comes: the handler must wake it."""
    caplog.set_level(logging.DEBUG, logger="asyncio")

    async def main() -> None:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        await asyncio.sleep(30)

    with StopOnSigterm(), pytest.raises(Terminated):
        asyncio.run(asyncio.wait_for(main(), timeout=10))  # a TimeoutError would fail this
    assert _asyncio_errors(caplog) == []


def test_a_second_sigterm_during_the_shutdown_is_ignored():
    with StopOnSigterm() as stop:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10**8):
                pass
        except Terminated:
            os.kill(os.getpid(), signal.SIGTERM)  # a supervisor repeating itself
            for _ in range(10**6):
                pass
    assert stop.received


def test_a_loop_that_closes_before_its_next_turn_still_gets_it_raised():
    """The signal came during the loop's last turn: the loop never runs the deferred raise, so
    the handler's timer sends the signal again and it is raised outside the loop."""
    loop = asyncio.new_event_loop()

    def last_turn() -> None:
        loop.stop()  # this turn is the last
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10**5))  # the handler runs here, inside the loop, and defers

    started = time.monotonic()
    with StopOnSigterm() as stop, pytest.raises(Terminated):
        loop.call_soon(last_turn)
        try:
            loop.run_forever()
        finally:
            loop.close()  # drops the raise the handler scheduled
        assert stop.received  # received, not raised yet
        while time.monotonic() - started < 10:
            time.sleep(0.05)  # the redelivered signal is raised in place, in here
    assert time.monotonic() - started < 3
