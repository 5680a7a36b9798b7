"""``KVBatchMeta``: the only thing the controller holds about a batch, and the key scheme.

A batch is a list of keys in one data-plane partition plus one tag dict per key. No tensor
ever lives here: workers fetch the fields they need from the data plane with these keys.
This module imports neither torch nor ray, so the controller and the CLI stay light.

Key scheme: ``{uid}_{session_id}_{index}``. ``uid`` names a prompt (it must not contain
``_`` so that the key splits unambiguously), ``session_id`` is the sample number within the
prompt's group (``[0, n)``), ``index`` numbers the outputs one session emits (``[0, m)``).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

KEY_SEPARATOR = "_"


class KeyFormatError(ValueError):
    """A key or uid does not follow the ``{uid}_{session_id}_{index}`` scheme."""


def new_uid() -> str:
    """A fresh prompt uid: 32 hex characters, never containing ``_``."""
    return uuid.uuid4().hex


def make_key(uid: str, session_id: int, index: int = 0) -> str:
    """Build ``"{uid}_{session_id}_{index}"``; ``uid`` must be non-empty and ``_``-free."""
    if not isinstance(uid, str) or not uid or KEY_SEPARATOR in uid:
        raise KeyFormatError(
            f"uid {uid!r} is invalid: a uid must be a non-empty string without '_' "
            "(use rlctl.protocol.kv.new_uid())"
        )
    if not _is_natural(session_id) or not _is_natural(index):
        raise KeyFormatError(
            f"session_id and index must be non-negative ints, got {session_id!r} and {index!r}"
        )
    return f"{uid}{KEY_SEPARATOR}{session_id}{KEY_SEPARATOR}{index}"


def parse_key(key: str) -> tuple[str, int, int]:
    """Split ``"{uid}_{session_id}_{index}"`` into ``(uid, session_id, index)``."""
    parts = key.split(KEY_SEPARATOR) if isinstance(key, str) else []
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
        raise KeyFormatError(
            f"key {key!r} does not follow '{{uid}}_{{session_id}}_{{index}}' "
            "(build keys with rlctl.protocol.kv.make_key)"
        )
    return parts[0], int(parts[1]), int(parts[2])


def _is_natural(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class KVBatchMeta:
    """Keys of one partition with one tag dict per key; small and picklable.

    The tag dicts are copied on construction, so a caller's dicts never change a batch; the
    batches ``select``, ``chunk`` and ``concat`` make share those copies with their source,
    and :meth:`shared` builds a batch of dicts a caller hands over.
    Tags are read-only: a change made through one batch shows in the batches it shares with.
    """

    keys: tuple[str, ...]
    partition_id: str
    tags: tuple[dict[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        keys = tuple(self.keys)
        # map(dict, ...) copies in C: a million tag dicts in a third of the generator's time
        tags = tuple(map(dict, self.tags)) if self.tags else tuple({} for _ in keys)
        if len(tags) != len(keys):
            raise ValueError(f"KVBatchMeta: {len(keys)} keys but {len(tags)} tag dicts")
        _check_unique(keys)
        _check_partition(self.partition_id)
        # frozen dataclass: normalise through object.__setattr__ (lists -> tuples, tag copies)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "tags", tags)

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(zip(self.keys, self.tags, strict=True))

    def tag_values(self, name: str) -> list[Any]:
        """The value of tag ``name`` for every key; a key without it is an error."""
        try:  # one pass in C: at a million samples each tag dict read is a cache miss
            return list(map(operator.itemgetter(name), self.tags))
        except KeyError:
            missing = [k for k, t in self if name not in t]
        raise KeyError(f"tag {name!r} is missing on {len(missing)} key(s), e.g. {missing[:3]}")

    # ------------------------------------------------------------------ split
    @staticmethod
    def concat(metas: Sequence[KVBatchMeta]) -> KVBatchMeta:
        """Join batches of one partition, in order; keys must not repeat."""
        if not metas:
            raise ValueError("KVBatchMeta.concat needs at least one batch")
        partitions = {m.partition_id for m in metas}
        if len(partitions) != 1:
            raise ValueError(
                f"KVBatchMeta.concat: batches come from several partitions {sorted(partitions)}"
            )
        return KVBatchMeta.shared(
            tuple(k for m in metas for k in m.keys),
            metas[0].partition_id,
            tuple(t for m in metas for t in m.tags),
        )

    def select(self, idx: Sequence[int] | Callable[[str, dict[str, Any]], bool]) -> KVBatchMeta:
        """Keep positions ``idx`` (in that order) or the keys where ``idx(key, tags)`` is true.
        The new batch shares this one's tag dicts (see the class docstring)."""
        n = len(self)
        if callable(idx):
            positions = [i for i, (k, t) in enumerate(self) if idx(k, t)]
        else:
            positions = list(map(int, idx))
            if positions and not (-n <= min(positions) and max(positions) < n):
                bad = [i for i in positions if not -n <= i < n]
                raise IndexError(f"select: positions {bad[:5]} out of range for {n} keys")
            if positions and min(positions) < 0:
                positions = [i % n for i in positions]
            if len(set(positions)) != len(positions):  # (this batch's keys are unique)
                _check_unique(tuple(map(self.keys.__getitem__, positions)))  # names them
        return KVBatchMeta._built(
            tuple(map(self.keys.__getitem__, positions)),
            self.partition_id,
            tuple(map(self.tags.__getitem__, positions)),
        )

    @classmethod
    def shared(
        cls, keys: Sequence[str], partition_id: str, tags: Sequence[dict[str, Any]]
    ) -> KVBatchMeta:
        """A batch that holds the dicts of ``tags`` themselves, not copies, for a caller that
        hands them over and changes them no more (the ReplayBuffer hands over the tags its
        plane answered it with): at a million samples the copy costs a second and 300 MB.
        Checked like any batch: one dict per key, no key twice, a partition id."""
        keys, tags = tuple(keys), tuple(tags)
        if len(tags) != len(keys):
            raise ValueError(f"KVBatchMeta: {len(keys)} keys but {len(tags)} tag dicts")
        _check_unique(keys)
        _check_partition(partition_id)
        return cls._built(keys, partition_id, tags)

    @classmethod
    def _built(
        cls, keys: tuple[str, ...], partition_id: str, tags: tuple[dict[str, Any], ...]
    ) -> KVBatchMeta:
        """A batch of already checked parts (``__post_init__`` would copy every tag dict)."""
        out = object.__new__(cls)
        object.__setattr__(out, "keys", keys)
        object.__setattr__(out, "partition_id", partition_id)
        object.__setattr__(out, "tags", tags)
        return out

    def chunk(self, n: int) -> list[KVBatchMeta]:
        """Split into ``n`` contiguous runs whose sizes differ by at most one (the first
        ``len % n`` are one longer); chunks may be empty when ``n > len(self)``.

        Rollout dispatch uses this; training shards are balanced by ``seq_len`` and split by
        group in :mod:`rlctl.trainer.controller.balance`.
        """
        out, start = [], 0
        for size in _chunk_sizes(len(self), n):
            out.append(self.select(range(start, start + size)))
            start += size
        return out


def _check_unique(keys: tuple[str, ...]) -> None:
    if len(set(keys)) != len(keys):
        seen: set[str] = set()
        dup = sorted({k for k in keys if k in seen or seen.add(k)})[:5]
        raise ValueError(f"KVBatchMeta: duplicate keys {dup}")


def _check_partition(partition_id: object) -> None:
    if not isinstance(partition_id, str) or not partition_id:
        raise ValueError(f"KVBatchMeta: partition_id must be a non-empty str, got {partition_id!r}")


def _chunk_sizes(total: int, n: int) -> list[int]:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"chunk count must be a positive int, got {n!r}")
    base, extra = divmod(total, n)
    return [base + (1 if c < extra else 0) for c in range(n)]
