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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlctl.dataplane.contract import (
    DataPlaneError,
    MissingFieldError,
    UnknownKeyError,
    describe_keys,
)

Loc = tuple[int, int]  # (block_id, row within the block)
_NO_LOCS: dict[str, Loc] = {}  # read-only stand-in for a key that has tags but no data


@dataclass
class _Partition:
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> tags
    locs: dict[str, dict[str, Loc]] = field(default_factory=dict)  # key -> field -> loc
    version: int = 0  # bumped on every tag change and clear


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
        block holding ``handle``. Returns the partition's version."""
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
        all_tags = part.tags
        if tags is None:
            for key in keys:
                # A key exists once anything (data or tags) was put for it.
                all_tags.setdefault(key, {})
        else:
            for key, tag in zip(keys, tags, strict=True):
                merged = all_tags.setdefault(key, {})
                if tag:
                    merged.update(tag)
            if any(tags):
                part.version += 1
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
        part = self._partitions.get(partition_id)
        if part is None:
            return 0
        for key in keys:
            part.tags.pop(key, None)
            for loc in part.locs.pop(key, {}).values():
                self._release(loc[0])
        part.version += 1
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
