"""The KV contract every data-plane backend implements, and the errors it raises.

Modelled on TransferQueue's KV API (``kv_put`` / ``kv_batch_put`` / ``kv_batch_get`` /
``kv_list`` / ``kv_clear`` + async twins) with three differences: asking for an unknown key
or field is an error that names it, tag merges are atomic, and variable-length fields are
stored without padding (``layout`` picks jagged or padded on read).

Field values a put accepts (``fields`` is a ``TensorDict`` or a mapping, batch dim first):

* dense tensor ``[B, ...]`` (or numpy array): stored as is, read back dense with its dtype;
  ``[B]`` is one scalar per sample;
* variable-length: a ``torch.jagged`` nested tensor ``[B, j, ...]`` or a list of B tensors
  ``[L_i, ...]``: stored without padding; read back jagged (``layout="jagged"``) or
  right-padded ``[B, Lmax, ...]`` (``layout="padded"``; lengths via
  :func:`rlctl.dataplane.jagged.lengths` on a jagged read or the ``seq_len``-style tags);
* anything else per sample (strings, dicts): a list of B objects or a ``NonTensorStack``;
  read back as a ``NonTensorStack``.

``kv_put`` takes ONE sample: each tensor value is that sample's value without batch dim
(a dense row); pass a one-row nested tensor or ``[tensor]`` for a variable-length value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from rlctl.dataplane.errors import (  # re-exported: old imports from this module keep working
    DataPlaneClosedError,
    DataPlaneError,
    DuplicateKeyError,
    FieldLayoutError,
    MissingFieldError,
    RowCountError,
    ShapeMismatchError,
    TagCountError,
    UnknownKeyError,
)

if TYPE_CHECKING:
    from tensordict import TensorDict

Layout = Literal["jagged", "padded"]

# Terminal sample states (the ReplayBuffer waits for every expected key to reach one).
TERMINAL_STATUSES = frozenset({"success", "failure"})


def describe_keys(keys: Sequence[str], limit: int = 5) -> str:
    """``'a', 'b', ... (+N more)`` for error messages."""
    shown = ", ".join(repr(k) for k in list(keys)[:limit])
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return shown + more


@dataclass(frozen=True)
class TagChanges:
    """A partition's listing at ``version``, told as what changed since the caller's version.

    The answer of :meth:`DataPlane.kv_watch_changes`. ``changed`` maps every key created or
    whose tags changed since the caller's version to its *whole* tags at ``version``, oldest
    change first. Those dicts are read-only to the caller (it may at most replace a value by
    an equal one): a plane may answer with the dicts it holds, and then never changes a dict
    it answered with (a later change of the key gets a new dict), so an answer stays as it
    was. (At a million samples per step, copying every answered dict cost the ``memory``
    plane's watcher a microsecond a sample.) ``removed`` names the keys cleared since then
    that are absent at ``version``; the two never share a key. ``complete`` means ``changed``
    is the whole listing (a snapshot): the caller drops what it holds first. A plane answers a
    snapshot when the caller's version is ``-1``, not one it issued (from before a restart),
    or older than the change history it keeps; it may always answer one (merely slower).
    """

    version: int
    changed: dict[str, dict[str, Any]]
    removed: tuple[str, ...] = ()
    complete: bool = False

    def apply(self, listing: dict[str, dict[str, Any]]) -> None:
        """Bring ``listing`` (the caller's copy of the partition at the version it passed) to
        :attr:`version`: afterwards it equals ``kv_list`` of that version as a mapping."""
        if self.complete:
            listing.clear()
        for key in self.removed:
            listing.pop(key, None)
        listing.update(self.changed)


@runtime_checkable
class DataPlane(Protocol):
    """What the trainer and workers call; every backend implements it (sync + async)."""

    def kv_put(
        self,
        key: str,
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tag: dict[str, Any] | None = None,
    ) -> None:
        """Put one sample's fields and/or merge ``tag`` into its tags."""

    def kv_batch_put(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tags: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """Put B samples' fields (batch dim first) and/or merge one tag dict per key."""

    def kv_batch_get(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Sequence[str],
        *,
        layout: Layout = "jagged",
        pad_value: float = 0,
    ) -> TensorDict:
        """Read ``fields`` of ``keys`` (in that order) as a TensorDict of batch ``[B]``."""

    def kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        """Every key of the partition with a copy of its tags, in insertion order.

        The full listing, for tools (a checkpoint, an inspection); whoever follows a
        partition as it fills uses :meth:`kv_watch_changes`, which costs what changed."""

    def kv_clear(self, keys: Sequence[str], partition_id: str) -> None:
        """Drop keys (data and tags); keys already absent are ignored."""

    def kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        """Block until the partition's version exceeds ``version`` or ``timeout`` passes.

        Returns the current version. The version starts at 0 and grows whenever the
        partition's listing changes: a put that creates a key or carries a non-empty tag
        dict, and every ``kv_clear`` of an existing partition; a fields-only put to existing
        keys does not (training workers' writes wake nobody). ``timeout=0`` never waits.
        """

    def kv_watch_changes(self, partition_id: str, since: int, timeout: float) -> TagChanges:
        """What changed in the partition's listing since version ``since``, once it changed.

        Waits while the partition's version equals ``since`` (at most ``timeout`` seconds,
        ``timeout=0`` never waits), then answers :class:`TagChanges` of the current version:
        the keys created or re-tagged and the keys cleared since ``since`` -- never the whole
        partition, except as a snapshot (``complete``) for ``since=-1``, a version this plane
        did not issue, or one older than the history it keeps. Pass the answer's ``version``
        to the next call. This is how readiness reaches the ReplayBuffer: each wake costs
        what changed, so following a step of N samples costs O(N), not O(N^2).
        :class:`DataPlaneBase` gives a correct default (a snapshot on every wake).
        """

    async def async_kv_put(self, key, partition_id, fields=None, tag=None) -> None: ...
    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None) -> None: ...
    async def async_kv_batch_get(
        self, keys, partition_id, fields, *, layout="jagged", pad_value=0
    ): ...
    async def async_kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]: ...
    async def async_kv_clear(self, keys, partition_id) -> None: ...
    async def async_kv_watch(self, partition_id: str, version: int, timeout: float) -> int: ...
    async def async_kv_watch_changes(
        self, partition_id: str, since: int, timeout: float
    ) -> TagChanges: ...

    def close(self) -> None:
        """Release the backend's resources; further calls raise ``DataPlaneClosedError``."""


class AsyncTwinsMixin:
    """Async twins that run the sync call in a worker thread.

    Every backend's sync calls are thread-safe, so a thread keeps the event loop free while a
    put copies megabytes or a get waits on the object store.
    """

    async def async_kv_put(self, key, partition_id, fields=None, tag=None) -> None:
        put = self.kv_put  # type: ignore[attr-defined]
        await asyncio.to_thread(put, key, partition_id, fields, tag)

    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None) -> None:
        put = self.kv_batch_put  # type: ignore[attr-defined]
        await asyncio.to_thread(put, keys, partition_id, fields, tags)

    async def async_kv_batch_get(self, keys, partition_id, fields, *, layout="jagged", pad_value=0):
        return await asyncio.to_thread(
            self.kv_batch_get,
            keys,
            partition_id,
            fields,
            layout=layout,
            pad_value=pad_value,  # type: ignore[attr-defined]
        )

    async def async_kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        return await asyncio.to_thread(self.kv_list, partition_id)  # type: ignore[attr-defined]

    async def async_kv_clear(self, keys, partition_id) -> None:
        await asyncio.to_thread(self.kv_clear, keys, partition_id)  # type: ignore[attr-defined]

    async def async_kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        watch = self.kv_watch  # type: ignore[attr-defined]
        return await asyncio.to_thread(watch, partition_id, version, timeout)

    async def async_kv_watch_changes(
        self, partition_id: str, since: int, timeout: float
    ) -> TagChanges:
        changes = self.kv_watch_changes  # type: ignore[attr-defined]
        return await asyncio.to_thread(changes, partition_id, since, timeout)


class DataPlaneBase(AsyncTwinsMixin):
    """The contract's defaults: a backend that subclasses it writes the sync calls only.

    Supplies every ``async_*`` twin (:class:`AsyncTwinsMixin`) and a default
    :meth:`kv_watch_changes` built on ``kv_watch`` and ``kv_list``: correct, but every wake
    answers the whole listing as a snapshot, so a watcher pays for the partition's size per
    change. A backend that can keep a change history overrides it (the built-in ones do).
    """

    def kv_watch_changes(self, partition_id: str, since: int, timeout: float) -> TagChanges:
        # The version is read before the listing: a change landing in between is in the
        # listing and moves the version past what the caller passes next, so it wakes again
        # at once (a redundant snapshot, never a lost change).
        watch = self.kv_watch  # type: ignore[attr-defined]
        version = watch(partition_id, -1, 0)
        if 0 <= since <= version:  # a version of the future is answered at once
            version = watch(partition_id, since, timeout)
        listing = self.kv_list(partition_id)  # type: ignore[attr-defined]
        return TagChanges(version, listing, (), complete=True)


def check_put_args(
    keys: Sequence[str], tags: Sequence[dict[str, Any]] | None, fields: object
) -> list[str]:
    """Validate a batch put's keys/tags; returns the keys as a list."""
    if isinstance(keys, str):
        raise TypeError("kv_batch_put takes a sequence of keys; use kv_put for a single key")
    keys = list(keys)
    if any(not isinstance(k, str) or not k for k in keys):
        raise TypeError(
            f"keys must be non-empty strings, got {describe_keys([repr(k) for k in keys])}"
        )
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise DuplicateKeyError(f"a put names key(s) {describe_keys(dup)} more than once")
    if tags is not None and len(tags) != len(keys):
        raise TagCountError(
            f"{len(keys)} keys but {len(tags)} tag dicts; give one tag dict per key"
        )
    if fields is None and tags is None:
        raise ValueError("a put needs fields, tags or both")
    return keys


__all__ = [
    "TERMINAL_STATUSES",
    "AsyncTwinsMixin",
    "DataPlane",
    "DataPlaneBase",
    "DataPlaneClosedError",
    "DataPlaneError",
    "DuplicateKeyError",
    "FieldLayoutError",
    "Layout",
    "MissingFieldError",
    "RowCountError",
    "ShapeMismatchError",
    "TagChanges",
    "TagCountError",
    "UnknownKeyError",
    "check_put_args",
    "describe_keys",
]
