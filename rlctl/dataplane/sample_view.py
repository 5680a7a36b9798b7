"""The ReplayBuffer's state of one partition, kept current from listing changes.

The ReplayBuffer used to re-read and re-parse the whole partition on every wake (one wake per
put), which is quadratic in the samples of a step. :class:`PartitionState` instead applies
each :class:`~rlctl.dataplane.contract.TagChanges` answer of ``kv_watch_changes`` key by key:
every key is parsed once per change, and one lookup finds its uid's :class:`UidSamples`,
which is the mapping of the uid's outputs and holds which sessions are done, which outputs
failed and the step waiting for it (if any). Each step counts its incomplete uids, so whether
a step is ready is known in O(1) after any change: a step of N samples costs O(N) however its
puts arrive. (One object per uid, not a table per concern: at a million samples every object
a change touches is a cache miss; applying a million changes in random order took 3.6 us a
key with four tables per uid and takes 3.0 with one object, 1.4 and 0.8 at 1k.) A sampled
step's batch holds the tag dicts the plane's answers brought (read-only), not copies.

A ``uid`` tag equal to its key's uid is replaced by the uid's one string object (the uid the
step added; an equal value, which the read-only answers of the plane allow). Tags that arrived
one put at a time each brought their own copy of it, scattered over the heap in arrival order;
with one object per uid a sampled step's uids are grouped by a pointer test
(``balanced_group_partition``), pickle the uid once per group, and seven of a group's eight
copies are freed. At a million samples this took the split over 1,024 ranks from 1.8 s to well
under a second.

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


ORDER_SHIFT = 64
"""An output's place among its uid's outputs is one int, ``session << ORDER_SHIFT | index``
(an output index past 2**64 would sort with the next session's; no writer comes near it)."""


class UidSamples(dict):
    """One uid, in one object: the mapping itself holds its outputs in the partition (key ->
    tags) and :attr:`order` each output's place (key -> ``session << ORDER_SHIFT | index``,
    so ordering them needs no parsing), and its slots say which sessions are done, which
    outputs failed and which step waits for it. A change reaches everything through this one
    object (a cache miss at a million samples each extra table would cost again; the place
    table is the one extra, and it costs less than the tuples it replaced, below).

    Why the place is not kept with the tags in a ``(session, index, key, tags)`` tuple, as it
    was: a tuple holding a dict stays tracked by the garbage collector for life, so a million
    outputs were a million more objects every full collection walked, and their allocation
    triggered the collections in the controller's thread (1.5 us a sample at 1M). Ints and
    the tag dicts of str/int values are not tracked at all.

    A session is done once one of its outputs is terminal: :attr:`done` has bit ``session``
    set for each done session and :attr:`extra` counts a session's terminal outputs past the
    first (a multi-output session), so removing one keeps the others' count exact.
    """

    __slots__ = ("complete", "done", "extra", "failed", "order", "step", "uid", "want")

    def __init__(self, uid: str) -> None:
        super().__init__()
        self.uid = uid
        self.order: dict[str, int] = {}  # key -> session << ORDER_SHIFT | index
        self.done = 0  # bit s: session s has a terminal output
        self.extra: dict[int, int] | None = None  # session -> terminal outputs past the first
        self.failed: dict[str, str] | None = None  # key -> "key: error", in the order seen
        self.step: Step | None = None  # the step waiting for this uid
        self.want = 0  # the sessions that step expects
        self.complete = False  # counted as complete in step.incomplete

    def put(self, key: str, session: int, index: int, tags: dict[str, Any]) -> None:
        old = self.get(key)
        if old is not None:
            self._unmark(key, old)
        self[key] = tags
        self.order[key] = session << ORDER_SHIFT | index
        uid = tags.get("uid")
        if type(uid) is str and uid == self.uid:  # (a str subclass keeps its own type)
            tags["uid"] = self.uid  # one string object per uid (see the module docstring)
        status = tags.get("status")
        if status not in TERMINAL_STATUSES:
            return
        bit = 1 << session
        if self.done & bit:
            if self.extra is None:
                self.extra = {}
            self.extra[session] = self.extra.get(session, 0) + 1
        else:
            self.done |= bit
        if status == "failure":
            if self.failed is None:
                self.failed = {}
            self.failed[key] = f"{key}: {tags.get('error', 'no error tag')}"

    def drop(self, key: str) -> None:
        old = self.pop(key, None)
        if old is not None:
            self._unmark(key, old)
            del self.order[key]

    def _unmark(self, key: str, tags: dict[str, Any]) -> None:
        """Undo what output ``key``'s ``tags`` counted (it is leaving or being replaced)."""
        if tags.get("status") not in TERMINAL_STATUSES:
            return
        session = self.order[key] >> ORDER_SHIFT
        extra = self.extra
        if extra and session in extra:
            if extra[session] > 1:
                extra[session] -= 1
            else:
                del extra[session]
        else:
            self.done &= ~(1 << session)
        if self.failed:
            self.failed.pop(key, None)

    def reset(self) -> None:
        """No outputs (a snapshot follows)."""
        self.clear()
        self.order = {}
        self.done, self.extra, self.failed = 0, None, None

    def sessions_done(self) -> int:
        return self.done.bit_count()

    def settle(self) -> None:
        """Update the waiting step's count and failures after a change (O(1))."""
        step = self.step
        if step is None:
            return
        complete = self.sessions_done() >= self.want
        if complete != self.complete:
            self.complete = complete
            step.incomplete += -1 if complete else 1
        if self.failed:
            step.failures[self.uid] = next(iter(self.failed.values()))
        elif step.failures:
            step.failures.pop(self.uid, None)

    def ordered(self) -> list[str]:
        """Every output's key, by session, then index (then key: "1" and "01" parse alike)."""
        order = self.order  # by key first, then a stable sort by place: no tuple per key
        return sorted(sorted(order), key=order.__getitem__)


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
        if not samples:  # no outputs left either
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
        if changes.complete:
            self._drop_all()
        self._remove(changes.removed)
        self._change(changes.changed)
        if changes.complete:
            for step in self.steps.values():
                for samples in step.uids.values():
                    samples.settle()
        self.version = changes.version

    def _drop_all(self) -> None:
        """Forget every output (a snapshot follows); uids a step waits for stay."""
        uids = self.uids
        for uid, samples in list(uids.items()):
            samples.reset()
            if samples.step is None:
                del uids[uid]

    def _remove(self, keys: tuple[str, ...]) -> None:
        uids = self.uids
        for key in keys:
            parsed = _parse(key)
            samples = None if parsed is None else uids.get(parsed[0])
            if samples is None:
                continue
            samples.drop(key)
            if samples.step is not None:
                samples.settle()
            elif not samples:
                del uids[samples.uid]

    def _change(self, changed: dict[str, dict[str, Any]]) -> None:
        uids = self.uids
        for key, tags in changed.items():
            parsed = _parse(key)
            if parsed is None:
                continue
            uid, session, index = parsed
            samples = uids.get(uid)
            if samples is None:
                samples = uids[uid] = UidSamples(uid)
            samples.put(key, session, index, tags)
            if samples.step is not None:
                samples.settle()

    # ------------------------------------------------------------------ answers
    def meta(self, partition: str, step: Step) -> KVBatchMeta:
        """Every output key of the step's uids: by uid (as added), session, index. The batch
        holds the state's own tag dicts (the plane's read-only answers, never changed here but
        for the ``uid`` tag's object: an output put again gets a new dict), not copies."""
        keys: list[str] = []
        tags: list[dict[str, Any]] = []
        for samples in step.uids.values():
            for key in samples.ordered():
                keys.append(key)
                tags.append(samples[key])
        return KVBatchMeta.shared(tuple(keys), partition, tuple(tags))

    @staticmethod
    def missing(step: Step) -> dict[str, tuple[int, int]]:
        """uid -> (sessions done, sessions expected) of the step's incomplete uids."""
        return {uid: (s.sessions_done(), s.want)
                for uid, s in step.uids.items() if not s.complete}


def _parse(key: str) -> tuple[str, int, int] | None:
    try:
        return parse_key(key)
    except KeyFormatError:
        return None  # a prompt marker or a foreign key: not a sample
