"""The bookkeeping every backend shares: keys, tags and where each field's value lives.

Pure Python, no torch, no locking: the memory backend calls it under its lock, the Ray
index actor calls it from its single event loop (one method runs at a time, so a tag merge
is atomic). Data is written in *blocks* (one per put); the index records, per key and
field, ``(block_id, row)`` and keeps a block's opaque handle (a torch block, a Ray
``ObjectRef``, a field-kind map) alive while any row still references it.

A block may be registered before its bytes exist: its handle is then :class:`Reserved` until
:meth:`KeyIndex.commit` hands the real one over (the ``ray`` plane registers a put's keys
while it copies the block into the object store). Keys and tags of a reserved block are
visible at once; :meth:`KeyIndex.locate` reports the reserved blocks a read would touch, and
the caller decides how to wait.

Every partition also keeps a short change history, so that a watcher learns what changed
since the version it holds (:meth:`KeyIndex.changes`) at the cost of what changed, not of the
partition's size: per live key the version of its last change (in change order), and per
cleared key the version of its clear, kept while there are no more of those than
``max(MIN_TOMBSTONES, live keys)`` (past that a snapshot is as cheap, so the oldest go and a
watcher older than them gets one).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlctl.dataplane.contract import (
    DataPlaneError,
    MissingFieldError,
    TagChanges,
    UnknownKeyError,
    describe_keys,
)

Loc = tuple[int, int]  # (block_id, row within the block)
_NO_LOCS: dict[str, Loc] = {}  # read-only stand-in for a key that has tags but no data

# Cleared keys remembered for watchers at least (more while the partition holds more keys).
MIN_TOMBSTONES = 1024


@dataclass
class _Partition:
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> tags
    locs: dict[str, dict[str, Loc]] = field(default_factory=dict)  # key -> field -> loc
    version: int = 0  # bumped whenever the listing changes (see KeyIndex.put)
    # key -> version of its last listing change, in that order (a change moves it to the end)
    stamps: dict[str, int] = field(default_factory=dict)
    # cleared key -> version of the clear, oldest first (OrderedDict: O(1) pops at the front)
    removed: OrderedDict[str, int] = field(default_factory=OrderedDict)
    floor: int = 0  # the oldest version whose changes are still all known

    def stamp(self, keys: Iterable[str]) -> None:
        """One new version in which ``keys`` were created or re-tagged."""
        self.version += 1
        version, stamps, removed = self.version, self.stamps, self.removed
        for key in keys:
            stamps.pop(key, None)  # to the end: stamps stay in change order
            stamps[key] = version
            if removed:
                removed.pop(key, None)

    def forget(self, keys: Iterable[str]) -> None:
        """One new version in which ``keys`` (live ones) were cleared."""
        self.version += 1
        for key in keys:
            del self.stamps[key]
            self.removed[key] = self.version
        # A watcher further behind than the kept tombstones gets a snapshot instead.
        keep = max(MIN_TOMBSTONES, len(self.tags))
        while len(self.removed) > keep:
            _, self.floor = self.removed.popitem(last=False)


@dataclass
class Located:
    """Where to read a get's fields: the blocks involved and each field's rows."""

    handles: dict[int, Any]  # block_id -> handle
    locs: dict[str, list[Loc]]  # field -> one loc per requested key, in key order


@dataclass(frozen=True)
class Reserved:
    """The handle of a block whose bytes are still on their way (see :meth:`KeyIndex.commit`)."""

    token: str  # chosen by the writer, unique per put
    since: float  # time.monotonic() of the reservation (error messages say how long)


@dataclass(frozen=True)
class Failed:
    """The handle of a reserved block whose writer could not store the bytes."""

    reason: str


def _merge_tags(
    all_tags: dict[str, dict[str, Any]],
    keys: Sequence[str],
    tags: Sequence[dict[str, Any]] | None,
) -> list[str]:
    """Merge a put's tags (``None``: none, but the keys exist now); returns the keys created
    or re-tagged, whose listing entry changed."""
    stamped: list[str] = []
    if tags is None:
        for key in keys:
            # A key exists once anything (data or tags) was put for it.
            if key not in all_tags:
                all_tags[key] = {}
                stamped.append(key)
        return stamped
    for key, tag in zip(keys, tags, strict=True):
        merged = all_tags.get(key)
        if merged is None:
            all_tags[key] = dict(tag) if tag else {}
            stamped.append(key)
        elif tag:
            # A new dict, never an update in place: changes() answers with the dicts held
            # here (no copy), and an answer must stay as it was (TagChanges).
            all_tags[key] = {**merged, **tag}
            stamped.append(key)
    return stamped


class KeyIndex:
    """Keys, tags and field locations of every partition."""

    def __init__(self) -> None:
        self._partitions: dict[str, _Partition] = {}
        self._blocks: dict[int, list[Any]] = {}  # block_id -> [handle, live row count]
        self._reserved: dict[str, int] = {}  # token -> block_id, while its handle is Reserved
        self._next_block = 0

    # ------------------------------------------------------------------ writes
    def put(
        self,
        partition_id: str,
        keys: Sequence[str],
        tags: Sequence[dict[str, Any]] | None,
        handle: Any = None,
        fields: Sequence[str] = (),
    ) -> int:
        """Register a put: merge tags, point ``fields`` of ``keys[i]`` at row ``i`` of a new
        block holding ``handle``. Returns the partition's version, which moved if the put
        created a key or carried a non-empty tag dict (the listing changed)."""
        part = self._partitions.setdefault(partition_id, _Partition())
        if fields:
            block_id = self._next_block
            self._next_block += 1
            # Every (key, field) pair references the block; overwrites below release theirs.
            self._blocks[block_id] = [handle, len(keys) * len(fields)]
            if isinstance(handle, Reserved):
                self._reserved[handle.token] = block_id
            all_locs = part.locs
            for row, key in enumerate(keys):
                key_locs = all_locs.get(key)
                if key_locs is None:  # a key's first data: no old locations to release
                    all_locs[key] = dict.fromkeys(fields, (block_id, row))
                    continue
                for name in fields:
                    old = key_locs.get(name)
                    if old is not None:
                        self._release(old[0])
                    key_locs[name] = (block_id, row)
        stamped = _merge_tags(part.tags, keys, tags)
        if stamped:
            part.stamp(stamped)
        return part.version

    def commit(self, token: str, handle: Any) -> bool:
        """Give the block reserved under ``token`` its real handle (or a :class:`Failed`).

        False when nothing holds that block any more (its keys were cleared or overwritten
        before the bytes arrived): the handle is dropped, and with it the bytes."""
        block_id = self._reserved.pop(token, None)
        if block_id is None:
            return False
        self._blocks[block_id][0] = handle
        return True

    def clear(self, partition_id: str, keys: Sequence[str]) -> int:
        """Drop ``keys``; a new version even when none of them existed (as before)."""
        part = self._partitions.get(partition_id)
        if part is None:
            return 0
        gone = []
        for key in keys:
            if part.tags.pop(key, None) is None:
                continue
            gone.append(key)
            for loc in part.locs.pop(key, {}).values():
                self._release(loc[0])
        part.forget(gone)
        return part.version

    def _release(self, block_id: int) -> None:
        entry = self._blocks[block_id]
        entry[1] -= 1
        if entry[1] <= 0:
            del self._blocks[block_id]  # drops the handle: the block's memory can go
            if isinstance(entry[0], Reserved):
                del self._reserved[entry[0].token]

    # ------------------------------------------------------------------ reads
    def list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        part = self._partitions.get(partition_id)
        return {} if part is None else {k: dict(t) for k, t in part.tags.items()}

    def version(self, partition_id: str) -> int:
        part = self._partitions.get(partition_id)
        return 0 if part is None else part.version

    def changes(self, partition_id: str, since: int) -> TagChanges:
        """The listing's changes from version ``since`` to now (see :class:`TagChanges`).

        O(changes since ``since``): the change history is walked from its newest end. A
        snapshot when ``since`` is -1, newer than the partition (a version of an index that
        was replaced) or older than the kept tombstones.
        """
        part = self._partitions.get(partition_id)
        if part is None:  # never written: version 0, nothing in it
            return TagChanges(0, {}, (), complete=since != 0)
        if since < part.floor or since > part.version:
            return TagChanges(part.version, self.list(partition_id), (), complete=True)
        recent = []
        for key, stamp in reversed(part.stamps.items()):
            if stamp <= since:
                break
            recent.append(key)
        removed = []
        for key, stamp in reversed(part.removed.items()):
            if stamp <= since:
                break
            removed.append(key)
        tags = part.tags
        changed = {key: tags[key] for key in reversed(recent)}  # shared: never changed here
        return TagChanges(part.version, changed, tuple(reversed(removed)))

    def locate(self, partition_id: str, keys: Sequence[str], fields: Sequence[str]) -> Located:
        """Locations of ``fields`` for ``keys``; unknown keys and unwritten fields raise."""
        part = self._partitions.get(partition_id)
        known = part.tags if part is not None else {}
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise UnknownKeyError(
                f"partition {partition_id!r} has no key(s) {describe_keys(unknown)} "
                f"({len(unknown)} of {len(keys)} requested are unknown; put them first "
                "or check the partition)",
                keys=unknown,
            )
        handles: dict[int, Any] = {}
        out: dict[str, list[Loc]] = {}
        key_locs = [part.locs.get(k, _NO_LOCS) for k in keys]  # type: ignore[union-attr]
        for name in fields:
            try:
                locs = [kl[name] for kl in key_locs]
            except KeyError:
                raise self._missing(part, partition_id, keys, name) from None  # type: ignore[arg-type]
            for block_id in {loc[0] for loc in locs}:
                handle = self._blocks[block_id][0]
                if isinstance(handle, Failed):
                    raise DataPlaneError(
                        f"field {name!r} of keys {describe_keys(keys)} in partition "
                        f"{partition_id!r} was never stored: its writer failed mid-put "
                        f"({handle.reason}); put those keys again"
                    )
                handles[block_id] = handle
            out[name] = locs
        return Located(handles, out)

    @staticmethod
    def _missing(part: _Partition, partition_id: str, keys: Sequence[str], name: str) -> Exception:
        lacking = [k for k in keys if name not in part.locs.get(k, _NO_LOCS)]
        present = sorted({f for k in keys for f in part.locs.get(k, _NO_LOCS)})
        return MissingFieldError(
            f"field {name!r} is not written for {len(lacking)} of {len(keys)} key(s) in "
            f"partition {partition_id!r}: {describe_keys(lacking)}; fields present on "
            f"these keys: {present or 'none'}",
            field=name,
            keys=lacking,
        )

    @staticmethod
    def reserved_in(located: Located) -> list[Reserved]:
        """The blocks of a locate whose bytes have not arrived yet."""
        return [h for h in located.handles.values() if isinstance(h, Reserved)]

    def block_count(self) -> int:
        """Live blocks (tests check that clears free memory)."""
        return len(self._blocks)
