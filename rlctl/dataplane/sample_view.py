"""The controller's mirror of one partition's samples, kept current from listing changes.

The ReplayBuffer used to re-read and re-parse the whole partition on every wake (one wake per
put), which is quadratic in the samples of a step. :class:`SampleView` instead applies each
:class:`~rlctl.dataplane.contract.TagChanges` answer of ``kv_watch_changes``: every key is
parsed once per change, and per uid it keeps the outputs, how many outputs of each session
are terminal and which failed, so the state of a uid is known in O(1) after any change.

Keys that do not parse as ``{uid}_{session}_{index}`` (prompt markers keyed by their bare
uid) are not samples and are skipped. Pure bookkeeping: no locking, no I/O.
"""

from __future__ import annotations

from typing import Any

from rlctl.dataplane.contract import TERMINAL_STATUSES, TagChanges
from rlctl.protocol.kv import KeyFormatError, parse_key


class UidSamples:
    """The outputs of one uid present in the partition."""

    __slots__ = ("failed", "outputs", "terminal")

    def __init__(self) -> None:
        # key -> (session, index, tags)
        self.outputs: dict[str, tuple[int, int, dict[str, Any]]] = {}
        self.terminal: dict[int, int] = {}  # session -> how many of its outputs are terminal
        self.failed: dict[str, str] = {}  # key -> "key: error", in the order seen

    @property
    def done_sessions(self) -> int:
        """Sessions with at least one terminal output (a session counts once it is done)."""
        return len(self.terminal)

    def first_failure(self) -> str | None:
        return next(iter(self.failed.values()), None)

    def ordered(self) -> list[tuple[str, dict[str, Any]]]:
        """``(key, tags)`` of every output, by session, then index."""
        items = sorted(self.outputs.items(), key=lambda kv: (kv[1][0], kv[1][1]))
        return [(key, entry[2]) for key, entry in items]

    def put(self, key: str, session: int, index: int, tags: dict[str, Any]) -> None:
        self.drop(key)
        self.outputs[key] = (session, index, tags)
        status = tags.get("status")
        if status in TERMINAL_STATUSES:
            self.terminal[session] = self.terminal.get(session, 0) + 1
        if status == "failure":
            self.failed[key] = f"{key}: {tags.get('error', 'no error tag')}"

    def drop(self, key: str) -> None:
        old = self.outputs.pop(key, None)
        if old is None:
            return
        session, _, tags = old
        if tags.get("status") in TERMINAL_STATUSES:
            left = self.terminal[session] - 1
            if left:
                self.terminal[session] = left
            else:
                del self.terminal[session]
        self.failed.pop(key, None)


class SampleView:
    """Sample keys of one partition grouped by uid, as of :attr:`version`."""

    def __init__(self) -> None:
        self.version = -1  # nothing seen yet: the first answer is a snapshot
        self.uids: dict[str, UidSamples] = {}

    def apply(self, changes: TagChanges) -> set[str] | None:
        """Bring the view to ``changes.version``; returns the uids whose samples changed,
        or ``None`` after a snapshot (every uid may have)."""
        uids = self.uids
        if changes.complete:
            uids.clear()
        touched: set[str] = set()
        for key in changes.removed:
            parsed = _parse(key)
            if parsed is not None and parsed[0] in uids:
                group = uids[parsed[0]]
                group.drop(key)
                touched.add(parsed[0])
                if not group.outputs:
                    del uids[parsed[0]]
        for key, tags in changes.changed.items():
            parsed = _parse(key)
            if parsed is None:
                continue
            uid, session, index = parsed
            group = uids.get(uid)
            if group is None:
                group = uids[uid] = UidSamples()
            group.put(key, session, index, tags)
            touched.add(uid)
        self.version = changes.version
        return None if changes.complete else touched


def _parse(key: str) -> tuple[str, int, int] | None:
    try:
        return parse_key(key)
    except KeyFormatError:
        return None  # a prompt marker or a foreign key: not a sample
