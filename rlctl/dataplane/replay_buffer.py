"""The ReplayBuffer: which samples of a step are ready, pushed rather than polled.

The controller ``add``s the prompts of a step (uid, how many sessions it expects for that
uid -- the group size n, which may differ per uid -- and the global step). Rollout workers
put each output under ``{uid}_{session_id}_{index}`` with a ``status`` tag that ends as
``success`` or ``failure`` (and an ``error`` tag on failure). A session counts as done once
one of its outputs is terminal, so a session that emits several outputs must put them in one
``kv_batch_put`` (one atomic index update); with one output per session, sessions = samples.
``sample`` returns the step's :class:`KVBatchMeta` once every expected session is done.

Readiness is pushed and incremental: between checks ``sample`` parks in the plane's
``kv_watch_changes``, which returns as soon as any writer (in any process) changes the
listing and answers with what changed since the version the buffer holds. The buffer keeps a
:class:`~rlctl.dataplane.sample_view.PartitionState` of each partition (per uid its outputs,
its terminal sessions and the step waiting for it; per step a count of incomplete uids),
updated per changed key: a step of N samples costs O(N) however its puts arrive, and the
latency from the last put to ``sample`` returning is one notification. It never hangs: a
failed sample raises :class:`RolloutFailure` with its uid and error, and a step whose samples
do not all arrive raises :class:`SampleTimeout` naming the missing uids.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from rlctl.dataplane.contract import DataPlane, DataPlaneError
from rlctl.dataplane.sample_view import PartitionState, Step
from rlctl.protocol.kv import KEY_SEPARATOR, KeyFormatError, KVBatchMeta


class RolloutFailure(DataPlaneError):
    """A sample of the step ended in ``failure``; ``failures`` maps uid -> error text."""

    def __init__(self, message: str, failures: dict[str, str]) -> None:
        super().__init__(message)
        self.failures = failures


class SampleTimeout(DataPlaneError, TimeoutError):
    """Not every expected sample of the step became terminal in time; ``missing`` maps
    uid -> (sessions done, sessions expected)."""

    def __init__(self, message: str, missing: dict[str, tuple[int, int]]) -> None:
        super().__init__(message)
        self.missing = missing


class ReplayBuffer:
    """Tracks the uids of each step and waits for their samples on a data plane.

    Thread-safe: the state sits behind one lock, which is never held while waiting on the
    plane, so threads may ``add``, ``remove`` and ``sample`` (other steps) meanwhile.
    """

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self._lock = threading.Lock()
        # partition -> its samples and steps: the controller's own state (metadata only)
        self._partitions: dict[str, PartitionState] = {}

    def _partition(self, partition: str) -> PartitionState:
        state = self._partitions.get(partition)
        if state is None:
            state = self._partitions[partition] = PartitionState()
        return state

    def add(self, partition: str, items: Sequence[tuple[str, int, int]]) -> None:
        """Expect ``expected_count`` sessions for each ``(uid, expected_count, global_step)``."""
        items = list(items)
        for uid, count, _ in items:
            if not isinstance(count, int) or count < 1:
                raise ValueError(
                    f"uid {uid!r}: expected_count must be a positive int, got {count!r}"
                )
            if KEY_SEPARATOR in uid:
                raise KeyFormatError(
                    f"uid {uid!r} contains '_'; build uids with rlctl.protocol.kv.new_uid()"
                )
        with self._lock:
            state = self._partition(partition)
            for uid, count, step in items:
                state.expect(uid, count, int(step))

    def pending(self, partition: str) -> dict[str, int]:
        """uid -> global step of every uid added and not yet removed."""
        with self._lock:
            state = self._partitions.get(partition)
            return {} if state is None else state.expected()

    def sample(self, partition: str, global_step: int, timeout: float) -> KVBatchMeta:
        """All sample keys of ``global_step``'s uids once each uid has its expected count of
        terminal sessions; keys ordered by uid (as added), session, index."""
        with self._lock:
            state = self._partition(partition)
            if global_step not in state.steps:
                raise ValueError(
                    f"no uid was added for step {global_step} in partition {partition!r}; call "
                    "ReplayBuffer.add(partition, [(uid, expected_count, global_step), ...]) "
                    "first"
                )
        deadline = time.monotonic() + timeout
        wait = 0.0  # first catch up with what is there now
        while True:
            self._catch_up(partition, state, wait)
            with self._lock:
                step = state.steps.get(global_step)
                if step is None:
                    raise ValueError(
                        f"step {global_step}'s uids in partition {partition!r} were removed "
                        "while sampling it"
                    )
                if step.failures:
                    raise _failure(partition, global_step, step)
                if not step.incomplete:
                    return state.meta(partition, step)
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise _timeout(partition, step, timeout)

    def _catch_up(self, partition: str, state: PartitionState, timeout: float) -> None:
        """Apply the plane's changes since the state's version (waiting up to ``timeout``
        for one). The wait runs without the lock; if another thread moved the state on
        meanwhile, this answer is older than the state and is dropped."""
        with self._lock:
            since = state.version
        changes = self.plane.kv_watch_changes(partition, since, timeout)
        with self._lock:
            if state.version == since:
                state.apply(changes)

    def remove(self, partition: str, keys: Sequence[str]) -> None:
        """Forget the uids of ``keys`` (call after ``kv_clear`` of a finished step)."""
        with self._lock:
            state = self._partitions.get(partition)
            if state is None:
                return
            last = None
            for key in keys:
                # {uid}_{session}_{index} or a prompt marker keyed by its bare uid; no uid
                # holds the separator, so what precedes it is the uid either way.
                uid = key.partition(KEY_SEPARATOR)[0]
                if uid != last:
                    state.forget(uid)
                    last = uid


def _failure(partition: str, global_step: int, step: Step) -> RolloutFailure:
    failures = dict(step.failures)
    return RolloutFailure(
        f"step {global_step}: {len(failures)} uid(s) failed in partition {partition!r}: "
        + "; ".join(f"{u}: {e}" for u, e in list(failures.items())[:5]),
        failures,
    )


def _timeout(partition: str, step: Step, timeout: float) -> SampleTimeout:
    missing = PartitionState.missing(step)
    shown = ", ".join(
        f"{u} ({got}/{want} sessions terminal)" for u, (got, want) in list(missing.items())[:8]
    )
    return SampleTimeout(
        f"step {step.number}: {len(missing)} of {len(step.uids)} uid(s) in partition "
        f"{partition!r} are not complete after {timeout:.1f} s: {shown}",
        missing,
    )
