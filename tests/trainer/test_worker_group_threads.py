"""Ray worker groups run a worker's named methods on threads of their own.

The rollout worker's ``update_weights`` must reach the engine while a ``generate`` call runs
(partial rollouts abort its requests there), however many calls hold the actor's default
threads (streaming submits generate calls ahead; they wait on the worker's one-at-a-time lock
in those threads); and every worker's liveness check (``pid``) must be answered however busy
it is, or the heartbeat would call a busy rank stopped.
"""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from rlctl.trainer.controller.worker_group import RayWorkerGroup, TrafficMeter, WorkerError
from rlctl.trainer.worker.rollout_worker import RolloutWorker

pytestmark = pytest.mark.slow


class Worker:
    """Ties up threads with ``busy``; ``update_weights`` runs in a group of its own."""

    concurrency_groups = RolloutWorker.concurrency_groups
    method_groups = RolloutWorker.method_groups

    def ready(self) -> bool:
        return True

    def pid(self) -> int:
        return os.getpid()

    def busy(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def update_weights(self) -> str:
        return "updated"

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 * 1024**2,
                 _temp_dir=tempfile.mkdtemp(prefix="rlctl-ray-"), log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def test_a_weight_update_runs_while_every_default_thread_is_busy(ray_cluster):
    assert RolloutWorker.method_groups == {"pid": "liveness", "update_weights": "weights"}
    group = RayWorkerGroup("rollout", Worker, [{}], TrafficMeter(), timeout=60)
    try:
        busy = group.submit(Worker.busy, [{"seconds": 30.0}])
        more = [group.submit(Worker.busy, [{"seconds": 30.0}]) for _ in range(3)]  # 4 threads
        time.sleep(1.0)
        started = time.monotonic()
        assert group.call(Worker.update_weights, timeout=10) == ["updated"]
        assert time.monotonic() - started < 5
        # the liveness check has a thread of its own: a busy rank is alive, not stopped
        assert group.unresponsive() == []
        # a call in the default group waits for a free thread: late, and said to be alive
        with pytest.raises(WorkerError, match=r"busy did not finish within 2 s \(the process "
                           "still answers"):
            group.call(Worker.busy, [{"seconds": 0.0}], timeout=2)
        del busy, more
    finally:
        group.shutdown(grace_s=1.0)
