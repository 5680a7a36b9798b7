"""The ReplayBuffer: which samples of a step are ready, pushed rather than polled.

The controller ``add``s the prompts of a step (uid, how many sessions it expects for that
uid -- the group size n, which may differ per uid -- and the global step). Rollout workers
put each output under ``{uid}_{session_id}_{index}`` with a ``status`` tag that ends as
``success`` or ``failure`` (and an ``error`` tag on failure). A session counts as done once
one of its outputs is terminal, so a session that emits several outputs must put them in one
``kv_batch_put`` (one atomic index update); with one output per session, sessions = samples.
``sample`` returns the step's :class:`KVBatchMeta` once every expected session is done.

Readiness is pushed: between checks ``sample`` parks in the backend's ``kv_watch_list`` (or
``kv_watch``, then ``kv_list``), which returns as soon as any writer (in any process)
changes a tag, so the latency from the last put to ``sample`` returning is one notification,
not a polling period. It never hangs: a
failed sample raises :class:`RolloutFailure` with its uid and error, and a step whose
samples do not all arrive raises :class:`SampleTimeout` naming the missing uids.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlctl.dataplane.contract import TERMINAL_STATUSES, DataPlane, DataPlaneError
from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, parse_key

# Only for planes that offer no ``kv_watch`` (every built-in one does).
POLL_FALLBACK_S = 0.01


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


@dataclass(frozen=True)
class _Expected:
    count: int
    global_step: int


class ReplayBuffer:
    """Tracks the uids of each step and waits for their samples on a data plane."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        # partition -> uid -> what we wait for; the controller's own state (metadata only)
        self._expected: dict[str, dict[str, _Expected]] = {}

    def add(self, partition: str, items: Sequence[tuple[str, int, int]]) -> None:
        """Expect ``expected_count`` sessions for each ``(uid, expected_count, global_step)``."""
        table = self._expected.setdefault(partition, {})
        for uid, count, step in items:
            if not isinstance(count, int) or count < 1:
                raise ValueError(
                    f"uid {uid!r}: expected_count must be a positive int, got {count!r}"
                )
            if "_" in uid:
                raise KeyFormatError(
                    f"uid {uid!r} contains '_'; build uids with rlctl.protocol.kv.new_uid()"
                )
            table[uid] = _Expected(count, int(step))

    def pending(self, partition: str) -> dict[str, int]:
        """uid -> global step of every uid added and not yet removed."""
        return {u: e.global_step for u, e in self._expected.get(partition, {}).items()}

    def sample(self, partition: str, global_step: int, timeout: float) -> KVBatchMeta:
        """All sample keys of ``global_step``'s uids once each uid has its expected count of
        terminal sessions; keys ordered by uid (as added), session, index."""
        expected = {
            u: e.count
            for u, e in self._expected.get(partition, {}).items()
            if e.global_step == global_step
        }
        if not expected:
            raise ValueError(
                f"no uid was added for step {global_step} in partition {partition!r}; call "
                "ReplayBuffer.add(partition, [(uid, expected_count, global_step), ...]) first"
            )
        deadline = time.monotonic() + timeout
        version, listing = self._watch_list(partition, -1, 0)  # now: no wait
        while True:
            state = _StepState.from_listing(listing, expected)
            if state.failures:
                raise RolloutFailure(
                    f"step {global_step}: {len(state.failures)} uid(s) failed in partition "
                    f"{partition!r}: "
                    + "; ".join(f"{u}: {e}" for u, e in list(state.failures.items())[:5]),
                    state.failures,
                )
            if not state.missing:
                return state.meta(partition, listing, expected)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                shown = ", ".join(
                    f"{u} ({got}/{want} sessions terminal)"
                    for u, (got, want) in list(state.missing.items())[:8]
                )
                raise SampleTimeout(
                    f"step {global_step}: {len(state.missing)} of {len(expected)} uid(s) in "
                    f"partition "
                    f"{partition!r} are not complete after {timeout:.1f} s: {shown}",
                    state.missing,
                )
            version, listing = self._watch_list(partition, version, remaining)

    def _watch_list(
        self, partition: str, version: int, timeout: float
    ) -> tuple[int, dict[str, dict[str, Any]]]:
        """The partition's version once past ``version`` (or at ``timeout``) and its listing.

        One call where the plane offers ``kv_watch_list``; else the watch, then the listing:
        the version is read first, so a change landing in between bumps it past what the
        next watch is given, which then returns at once instead of missing the update."""
        watch_list = getattr(self.plane, "kv_watch_list", None)
        if watch_list is not None:
            return watch_list(partition, version, timeout)
        watch = getattr(self.plane, "kv_watch", None)
        if watch is not None:
            version = watch(partition, version, timeout)
        else:  # a third-party plane without push: a short sleep, then list again
            time.sleep(min(timeout, POLL_FALLBACK_S))
            version += 1
        return version, self.plane.kv_list(partition)

    def remove(self, partition: str, keys: Sequence[str]) -> None:
        """Forget the uids of ``keys`` (call after ``kv_clear`` of a finished step)."""
        table = self._expected.get(partition, {})
        for key in keys:
            try:
                uid = parse_key(key)[0]
            except KeyFormatError:
                uid = key  # a prompt marker keyed by its bare uid
            table.pop(uid, None)


@dataclass
class _StepState:
    keys_by_uid: dict[str, list[tuple[int, int, str]]]
    failures: dict[str, str]
    missing: dict[str, tuple[int, int]]

    @classmethod
    def from_listing(
        cls, listing: dict[str, dict[str, Any]], expected: dict[str, int]
    ) -> _StepState:
        keys_by_uid: dict[str, list[tuple[int, int, str]]] = {u: [] for u in expected}
        done_sessions: dict[str, set[int]] = {u: set() for u in expected}
        failures: dict[str, str] = {}
        for key, tags in listing.items():
            try:
                uid, session, index = parse_key(key)
            except KeyFormatError:
                continue  # prompt markers and foreign keys are not samples
            if uid not in expected:
                continue
            keys_by_uid[uid].append((session, index, key))
            status = tags.get("status")
            if status in TERMINAL_STATUSES:
                done_sessions[uid].add(session)
            if status == "failure":
                failures.setdefault(uid, f"{key}: {tags.get('error', 'no error tag')}")
        missing = {
            u: (len(done_sessions[u]), n) for u, n in expected.items() if len(done_sessions[u]) < n
        }
        return cls(keys_by_uid, failures, missing)

    def meta(
        self, partition: str, listing: dict[str, dict[str, Any]], expected: dict[str, int]
    ) -> KVBatchMeta:
        keys = [key for uid in expected for _, _, key in sorted(self.keys_by_uid[uid])]
        return KVBatchMeta(tuple(keys), partition, tuple(listing[k] for k in keys))
