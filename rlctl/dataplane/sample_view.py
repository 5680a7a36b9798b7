"""The ReplayBuffer's state of one partition, kept current from listing changes.

The ReplayBuffer used to re-read and re-parse the whole partition on every wake (one wake per
put), which is quadratic in the samples of a step. :class:`PartitionState` instead applies
each :class:`~rlctl.dataplane.contract.TagChanges` answer of ``kv_watch_changes`` key by key:
every key is parsed once per change, and one lookup finds its uid's :class:`UidSamples`,
which holds the uid's outputs, how many outputs of each session are terminal, which failed,
and the step waiting for it (if any). Each step counts its incomplete uids, so whether a step
is ready is known in O(1) after any change: a step of N samples costs O(N) however its puts
arrive. (One object per uid, not a table per concern: at a million samples every extra table
lookup is a cache miss.)

Keys that do not parse as ``{uid}_{session}_{index}`` (prompt markers keyed by their bare
uid) are not samples and are skipped. Pure bookkeeping: no locking, no I/O.
"""

from __future__ import annotations

from typing import Any

from rlctl.dataplane.contract import TERMINAL_STATUSES, TagChanges
from rlctl.protocol.kv import KeyFormatError, KVBatchMeta, parse_key


class Step:
    """The uids a step waits for (in the order added) and how many are not complete yet."""

    __slots__ = ("failures", "incomplete", "number", "uids")

    def __init__(self, number: int) -> None:
        self.number = number
        self.uids: dict[str, UidSamples] = {}
        self.incomplete = 0
        self.failures: dict[str, str] = {}  # uid -> "key: error" of its first failed output


class UidSamples:
    """One uid: its outputs in the partition and, while a step waits for it, that step."""

    __slots__ = ("complete", "failed", "outputs", "place", "step", "terminal", "uid", "want")

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.outputs: dict[str, dict[str, Any]] = {}  # key -> tags
        self.place: dict[str, tuple[int, int]] = {}  # key -> (session, index)
        self.terminal: dict[int, int] = {}  # session -> how many of its outputs are terminal
        self.failed: dict[str, str] | None = None  # key -> "key: error", in the order seen
        self.step: Step | None = None  # the step waiting for this uid
        self.want = 0  # the sessions that step expects
        self.complete = False  # counted as complete in step.incomplete

    def put(self, key: str, session: int, index: int, tags: dict[str, Any]) -> None:
        self.drop(key)
        self.outputs[key] = tags
        self.place[key] = (session, index)
        status = tags.get("status")
        if status in TERMINAL_STATUSES:
            self.terminal[session] = self.terminal.get(session, 0) + 1
            if status == "failure":
                if self.failed is None:
                    self.failed = {}
                self.failed[key] = f"{key}: {tags.get('error', 'no error tag')}"

    def drop(self, key: str) -> None:
        tags = self.outputs.pop(key, None)
        if tags is None:
            return
        session = self.place.pop(key)[0]
        if tags.get("status") in TERMINAL_STATUSES:
            left = self.terminal[session] - 1
            if left:
                self.terminal[session] = left
            else:
                del self.terminal[session]
            if self.failed:
                self.failed.pop(key, None)

    def clear(self) -> None:
        self.outputs, self.place, self.terminal, self.failed = {}, {}, {}, None

    def settle(self) -> None:
        """Update the waiting step's count and failures after a change (O(1))."""
        step = self.step
        if step is None:
            return
        complete = len(self.terminal) >= self.want  # a session is done once one output is
        if complete != self.complete:
            self.complete = complete
            step.incomplete += -1 if complete else 1
        if self.failed:
            step.failures[self.uid] = next(iter(self.failed.values()))
        elif step.failures:
            step.failures.pop(self.uid, None)

    def ordered(self) -> list[str]:
        """Every output key, by session, then index."""
        return sorted(self.place, key=self.place.__getitem__)


class PartitionState:
    """Sample keys of one partition grouped by uid, as of :attr:`version`, and the steps
    waiting for them."""

    def __init__(self) -> None:
        self.version = -1  # nothing seen yet: the first answer is a snapshot
        self.uids: dict[str, UidSamples] = {}
        self.steps: dict[int, Step] = {}

    # ------------------------------------------------------------------ expectations
    def expect(self, uid: str, count: int, step_number: int) -> None:
        samples = self.uids.get(uid)
        if samples is None:
            samples = self.uids[uid] = UidSamples(uid)
        elif samples.step is not None:
            self._unexpect(samples)  # added again: its new step and count win
        step = self.steps.get(step_number)
        if step is None:
            step = self.steps[step_number] = Step(step_number)
        step.uids[uid] = samples
        step.incomplete += 1
        samples.step, samples.want, samples.complete = step, count, False
        samples.settle()

    def forget(self, uid: str) -> None:
        samples = self.uids.get(uid)
        if samples is None:
            return
        if samples.step is not None:
            self._unexpect(samples)
        if not samples.outputs:
            del self.uids[uid]

    def _unexpect(self, samples: UidSamples) -> None:
        step = samples.step
        assert step is not None
        del step.uids[samples.uid]
        if not samples.complete:
            step.incomplete -= 1
        step.failures.pop(samples.uid, None)
        if not step.uids:
            del self.steps[step.number]
        samples.step, samples.want, samples.complete = None, 0, False

    def expected(self) -> dict[str, int]:
        """uid -> global step of every uid a step waits for."""
        return {uid: s.number for s in self.steps.values() for uid in s.uids}

    # ------------------------------------------------------------------ changes
    def apply(self, changes: TagChanges) -> None:
        """Bring the state to ``changes.version``."""
        uids = self.uids
        if changes.complete:
            for uid, samples in list(uids.items()):
                samples.clear()
                if samples.step is None:
                    del uids[uid]
        for key in changes.removed:
            parsed = _parse(key)
            samples = None if parsed is None else uids.get(parsed[0])
            if samples is not None:
                samples.drop(key)
                samples.settle()
                if not samples.outputs and samples.step is None:
                    del uids[samples.uid]
        for key, tags in changes.changed.items():
            parsed = _parse(key)
            if parsed is None:
                continue
            uid, session, index = parsed
            samples = uids.get(uid)
            if samples is None:
                samples = uids[uid] = UidSamples(uid)
            samples.put(key, session, index, tags)
            samples.settle()
        if changes.complete:
            for step in self.steps.values():
                for samples in step.uids.values():
                    samples.settle()
        self.version = changes.version

    # ------------------------------------------------------------------ answers
    def meta(self, partition: str, step: Step) -> KVBatchMeta:
        """Every output key of the step's uids: by uid (as added), session, index."""
        keys: list[str] = []
        tags: list[dict[str, Any]] = []
        for samples in step.uids.values():
            for key in samples.ordered():
                keys.append(key)
                tags.append(samples.outputs[key])
        return KVBatchMeta(tuple(keys), partition, tuple(tags))

    @staticmethod
    def missing(step: Step) -> dict[str, tuple[int, int]]:
        """uid -> (sessions done, sessions expected) of the step's incomplete uids."""
        return {uid: (len(s.terminal), s.want) for uid, s in step.uids.items() if not s.complete}


def _parse(key: str) -> tuple[str, int, int] | None:
    try:
        return parse_key(key)
    except KeyFormatError:
        return None  # a prompt marker or a foreign key: not a sample
