"""Every worker call has a bound: in-process calls (``--local``) and the recipe's keys."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import time
import types

import pytest

from rlctl.agents.contract import AgentLoop
from rlctl.config.recipe import ScheduleSection
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, set_registry
from rlctl.run.entry import train_from_recipe
from rlctl.trainer.controller.heartbeat import MISSED_BEATS, Heartbeat
from rlctl.trainer.controller.local_bound import PhaseTimeout, bounded
from rlctl.trainer.controller.worker_group import LocalWorkerGroup, TrafficMeter, WorkerError


def test_a_bounded_call_returns_its_value():
    assert bounded(lambda x, y=0: x + y, 5.0, "add", 2, y=3) == 5


def test_a_blocking_call_is_interrupted_at_its_bound():
    started = time.monotonic()
    with pytest.raises(PhaseTimeout, match="sleepy did not finish within 1 s"):
        bounded(time.sleep, 1.0, "sleepy", 30)
    assert time.monotonic() - started < 5


def test_except_exception_in_the_phase_does_not_swallow_the_bound():
    def stubborn():
        try:
            time.sleep(30)
        except Exception:  # noqa: BLE001 - what careless phase code does
            return "swallowed"
        return "finished"

    with pytest.raises(PhaseTimeout):
        bounded(stubborn, 0.5, "stubborn")


def test_the_bound_waits_while_a_debugger_holds_the_thread():
    # A tracer that traces every frame is what pdb looks like from the timer thread.
    def tracer(frame, event, arg):
        return tracer

    sys.settrace(tracer)
    try:
        assert bounded(lambda: time.sleep(1.5) or "done", 0.5, "debugged") == "done"
    finally:
        sys.settrace(None)


def test_off_the_main_thread_the_call_still_runs():
    out = []
    t = threading.Thread(target=lambda: out.append(bounded(lambda: 7, 0.1, "x")))
    t.start()
    t.join(10)
    assert out == [7]


class _Sleeper:
    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"


def test_a_local_worker_that_hangs_is_named_with_its_phase():
    group = LocalWorkerGroup("rollout", [_Sleeper()], TrafficMeter(), timeout=1.0)
    assert group.call(_Sleeper.nap, seconds=0.01) == ["rested"]
    started = time.monotonic()
    with pytest.raises(
        WorkerError, match=r"rollout rank 0 \(this process\) stopped answering during nap"
    ):
        group.call(_Sleeper.nap, seconds=30)
    assert time.monotonic() - started < 5
    with pytest.raises(WorkerError, match="within 2 s"):  # a caller's own bound wins
        group.call(_Sleeper.nap, seconds=30, timeout=2.0)


def test_the_recipe_bounds_every_phase_and_refuses_no_bound():
    schedule = ScheduleSection()
    assert schedule.phase_timeout_s == 600.0 and schedule.start_timeout_s == 600.0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            ScheduleSection(phase_timeout_s=bad)


def test_the_liveness_bound_is_split_into_checks_and_refuses_a_hair_trigger():
    assert ScheduleSection().liveness_timeout_s == 25.0
    default, quick = Heartbeat(lambda rank: None), Heartbeat(lambda rank: None, 10.0)
    # a check every 2/5 of the bound, 1/5 to answer each, three missed: the whole bound
    assert (default.beat_s, default.probe_timeout_s) == (10.0, 5.0)
    assert (quick.beat_s, quick.probe_timeout_s) == (4.0, 2.0)
    assert quick.beat_s + MISSED_BEATS * quick.probe_timeout_s == quick.bound_s == 10.0
    assert "(2 s each" in quick.describe()
    for bad in (0, 4.9, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="liveness_timeout_s"):
            ScheduleSection(liveness_timeout_s=bad)


class StuckLoop(AgentLoop):
    """An agent loop waiting for a tool that never answers."""

    def __init__(self, options=None):
        pass

    async def run(self, prompt, session_id, sampling, generate):
        await asyncio.sleep(3600)


class StuckBatchLoop(StuckLoop):
    """A loop that runs a call's sessions as one batch (like single_turn), which never ends."""

    async def run_batch(self, requests, sampling, generate, generate_many, *, session_timeout_s):
        await asyncio.sleep(3600)


@pytest.fixture
def stuck_loop_plugin():
    module = types.ModuleType("rlctl_test_stuck_loop")

    @hookimpl
    def register_agent_loops(register):
        register("stuck", StuckLoop, description="never returns")
        register("stuck_batch", StuckBatchLoop, description="its batch never returns")

    module.register_agent_loops = register_agent_loops
    sys.modules[module.__name__] = module
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)
    del sys.modules[module.__name__]


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["stuck", "stuck_batch"])
def test_a_local_run_whose_rollout_hangs_fails_within_the_bound(
    make_recipe, stuck_loop_plugin, capsys, loop
):
    recipe = make_recipe(rollout={"agent_loop": loop, "max_new_tokens": 3},
                         schedule={"total_steps": 3, "sample_timeout_s": 5, "phase_timeout_s": 5})
    started = time.monotonic()
    code = train_from_recipe(recipe)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1
    # each session is bounded: cancelled at sample_timeout_s, a failure naming its uid
    assert re.search(r"RolloutFailure: step 1: 8 uid\(s\) failed in partition 'train': "
                     r"[0-9a-f]{32}: [0-9a-f]{32}_\d_0: TimeoutError: session \d of prompt "
                     r"[0-9a-f]{32} ran past schedule.sample_timeout_s = 5 s", err), err[-2000:]
    assert took < 60, took  # model start-up plus the 5 s bound, not an hour
