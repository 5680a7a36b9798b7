"""The index actor behind the ``ray`` and ``transferqueue`` data planes.

One async actor (``num_cpus=0``) per run holds keys, tags and, per key and field, the block
(a Ray ``ObjectRef`` owned by this actor, or a field-kind map for transferqueue) and row
where the value lives. Its methods never ``await`` in the middle of an update, and the event
loop runs one at a time, so a tag merge is atomic however many processes write.

``watch`` is the push half of readiness: it parks the caller until a tag change bumps the
partition's version, so the ReplayBuffer learns of the last terminal sample within one actor
round trip instead of a polling period.

:class:`IndexActorClient` is the client half both backends share: whatever they answer from
the index alone (list, watch, tag registration, pickling, ending the actor).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

import ray

from rlctl.dataplane.contract import DataPlaneClosedError, DataPlaneError
from rlctl.dataplane.key_index import KeyIndex

Reply = tuple[str, Any]  # ("ok", value) or ("err", DataPlaneError): errors travel clean


@ray.remote(num_cpus=0)
class IndexActor:
    """Keys, tags and block locations of every partition of one run."""

    def __init__(self) -> None:
        self._index = KeyIndex()
        self._changed: asyncio.Event | None = None

    def _bump(self) -> None:
        # Wake every watcher; each re-checks its own partition's version.
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    async def put(
        self,
        partition_id: str,
        keys: Sequence[str],
        tags: Sequence[dict[str, Any]] | None,
        handle_box: list[Any] | None,
        fields: Sequence[str],
    ) -> Reply:
        # The handle comes boxed in a list so that Ray passes the ObjectRef itself instead
        # of resolving it to the block's bytes.
        handle = handle_box[0] if handle_box else None
        version = self._index.put(partition_id, keys, tags, handle, fields)
        if tags is not None:
            self._bump()
        return ("ok", version)

    async def locate(self, partition_id: str, keys: Sequence[str], fields: Sequence[str]) -> Reply:
        try:
            located = self._index.locate(partition_id, keys, fields)
        except DataPlaneError as exc:
            return ("err", exc)
        boxed = {bid: [h] for bid, h in located.handles.items()}
        return ("ok", (boxed, located.locs))

    async def list(self, partition_id: str) -> Reply:
        return ("ok", self._index.list(partition_id))

    async def clear(self, partition_id: str, keys: Sequence[str]) -> Reply:
        self._index.clear(partition_id, keys)
        self._bump()
        return ("ok", None)

    async def watch(self, partition_id: str, version: int, timeout: float) -> Reply:
        deadline = time.monotonic() + max(0.0, timeout)
        while self._index.version(partition_id) <= version:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                break
        return ("ok", self._index.version(partition_id))

    async def block_count(self) -> Reply:
        return ("ok", self._index.block_count())


def unwrap(reply: Reply) -> Any:
    """The value of an index reply, or raise the data-plane error it carries."""
    status, value = reply
    if status == "err":
        raise value
    return value


def call(ref: Any, timeout: float, what: str) -> Any:
    """``ray.get`` an index call with a timeout; actor death and timeouts become clear errors."""
    try:
        return unwrap(ray.get(ref, timeout=timeout))
    except ray.exceptions.GetTimeoutError:
        raise DataPlaneError(
            f"the data-plane index actor did not answer {what} within {timeout:.0f} s "
            "(is the Ray cluster overloaded? raise [data_plane.options] call_timeout_s)"
        ) from None
    except ray.exceptions.RayActorError as exc:
        raise DataPlaneError(
            f"the data-plane index actor died during {what}; the run's stored samples are lost "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None


def get_or_create(name: str, namespace: str) -> Any:
    """The named index actor of a run, created on first use (owned by the caller's job)."""
    return IndexActor.options(
        name=name, namespace=namespace, get_if_exists=True, num_cpus=0, max_concurrency=1000
    ).remote()


class IndexActorClient:
    """Calls the ``ray`` and ``transferqueue`` planes answer from the index actor alone.

    The host class provides ``_index`` (the actor handle), ``options.call_timeout_s``,
    ``run_id``, ``backend`` (its name), ``_closed`` and ``_check_open()``.
    """

    def __reduce__(self):
        if self._closed:
            raise DataPlaneClosedError(f"cannot pickle a closed {self.backend} data plane")
        # Connection info only (the actor handle); never the data.
        return (reconnect, (type(self), self.options, self.run_id, self._index))

    def _index_put(self, partition_id: str, keys: list[str], tags, box, names: list[str]) -> None:
        """Register ``keys``' fields ``names`` (block handle in ``box``) and a copy of their
        tags."""
        tags = None if tags is None else [dict(t) for t in tags]
        call(
            self._index.put.remote(partition_id, keys, tags, box, names),
            self.options.call_timeout_s,
            "put",
        )

    def kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        self._check_open()
        return call(self._index.list.remote(partition_id), self.options.call_timeout_s, "list")

    def kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        self._check_open()
        return call(
            self._index.watch.remote(partition_id, version, timeout),
            timeout + self.options.call_timeout_s,
            "watch",
        )

    def _end_index(self) -> None:
        """End the index actor (freeing every block it holds)."""
        # The actor may already be gone with its cluster (ray.shutdown before close).
        with contextlib.suppress(ValueError, ray.exceptions.RayError):
            ray.kill(self._index)


def reconnect(cls: type, options: Any, run_id: str, index: Any) -> Any:
    """Unpickle a plane handle: a ``cls`` attached to the same index actor."""
    return cls(options, run_id=run_id, _index=index)
