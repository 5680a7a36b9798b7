"""A worker that stops answering (SIGSTOP: alive, silent) fails the run within seconds.

The run (Ray mode, 2 FSDP ranks, one rollout actor) keeps the default 600 s phase bound; one
actor is stopped after the first steps. The heartbeat (rlctl/trainer/controller/heartbeat.py)
names it: the run must exit 1 naming that actor's rank, pid and phase within the heartbeat's
bound (``schedule.liveness_timeout_s``, set lower than its 25 s default here, as a user may)
plus a bounded shutdown, never the minutes the phase bound, a collective or an unbounded
``ray.get`` would wait. The steps are small (16 prompts of 4 samples, not tiny_grpo's 64 of 8):
what is tested is the stop being named, not what the steps learn.
"""

from __future__ import annotations

import re

import pytest

from rlctl.trainer.worker.rollout_worker import RolloutWorker
from rlctl.trainer.worker.training_worker import TrainingWorker
from tests.trainer.cli_runs import SMALL_STEPS, live_run, overrides

NAMED_S = 10  # the heartbeat's bound: a check every 4 s, 2 s to answer each, 3 missed
BOUNDS = ("-s", "schedule.total_steps=500",  # the default phase bounds: 600 s per phase
          "-s", f"schedule.liveness_timeout_s={NAMED_S}", *overrides(*SMALL_STEPS))
# + shutdown (10 s grace, Ray's own stop) + a loaded machine: far below the 600 s bound
WITHIN_S = NAMED_S + 45


@pytest.mark.slow
@pytest.mark.parametrize("role, group", [
    ("TrainingWorker", "train"),  # a rank stopped inside collectives: the case that hangs elsewhere
    ("RolloutWorker", "rollout"),  # stopped while the controller waits for samples
])
def test_a_stopped_worker_is_named_with_its_phase_within_the_bound(tmp_path, role, group):
    with live_run(tmp_path, *BOUNDS) as run:
        run.wait_for_steps(2)
        target = run.workers(role)[-1]
        run.stop(target)
        code, err, took = run.finish(timeout_s=WITHIN_S + 60)
    print(f"\n{role} SIGSTOPped: run exited {code} {took:.1f} s later (heartbeat {NAMED_S} s)")
    assert code == 1, err[-3000:]
    assert took < WITHIN_S, (took, err[-2000:])
    line = next(x for x in err.splitlines() if "training failed" in x)
    match = re.search(
        rf"{group} rank (\d+) \(pid {target.pid} on node 127\.0\.0\.1\) stopped answering "
        r"during (\w+)", line
    )
    assert match, line
    assert "no answer to 3 liveness checks in a row (2 s each" in line  # the run's bound
    worker_cls = RolloutWorker if group == "rollout" else TrainingWorker
    assert callable(getattr(worker_cls, match.group(2), None)), line  # a real phase, named
    assert "Traceback" not in err
