"""The index actor behind the ``ray`` and ``transferqueue`` data planes.

One async actor (``num_cpus=0``) per run holds keys, tags and, per key and field, the block
(a Ray ``ObjectRef`` this actor borrows, a small block itself, or a field-kind map for
transferqueue) and row where the value lives. Its methods never ``await`` in the middle of an
update, and the event loop runs one at a time, so a tag merge is atomic however many
processes write. Everything but ``watch`` arrives through ``batch``: a list of calls applied
in order in one turn, which is how concurrent callers of one process share a round trip.

A large ``ray`` put registers in two calls so that the index round trip overlaps the copy
into the object store: ``reserve`` (awaited: keys, tags and rows, the block's handle a
:class:`~rlctl.dataplane.key_index.Reserved`) goes out before the copy, ``commit`` (the
``ObjectRef``, not awaited) after it. A ``locate`` that touches a reserved block waits for its
commit, bounded by the wait its batch carries, then fails naming the stalled writer.

``watch`` is the push half of readiness: it parks the caller until a change of the listing
bumps the partition's version, so the ReplayBuffer learns of the last terminal sample within
one actor round trip instead of a polling period; ``watch_changes`` answers with what changed
since the caller's version (:meth:`KeyIndex.changes`), never the whole partition. Watchers
are woken once per batch, not once per put in it.

:class:`IndexActorClient` is the client half both backends share: whatever they answer from
the index alone (list, watch, tag registration, pickling, ending the actor).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import ray

from rlctl.dataplane.contract import DataPlaneClosedError, DataPlaneError, TagChanges
from rlctl.dataplane.index_batch import GroupCommit
from rlctl.dataplane.key_index import Failed, KeyIndex, Reserved

Reply = tuple[str, Any]  # ("ok", value) or ("err", DataPlaneError): errors travel clean


@ray.remote(num_cpus=0)
class IndexActor:
    """Keys, tags and block locations of every partition of one run."""

    def __init__(self) -> None:
        self._index = KeyIndex()
        self._changed: asyncio.Event | None = None
        self._landed: asyncio.Event | None = None  # set when a reserved block may have resolved
        self._batches = 0  # batch calls received, and the calls they carried (see stats)
        self._calls = 0
        self._dirty = False  # a listing changed since watchers were last woken

    def _bump(self) -> None:
        # Wake every watcher; each re-checks its own partition's version.
        self._dirty = False
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    def _bump_landed(self) -> None:
        # Wake reads parked on a reserved block; each re-locates (the block may be committed,
        # failed, or no longer referenced at all).
        if self._landed is not None:
            self._landed.set()
            self._landed = None

    # One synchronous body per call: no ``await`` inside, so each runs atomically.
    def _put(
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
        before = self._index.version(partition_id)
        version = self._index.put(partition_id, keys, tags, handle, fields)
        if version != before:
            self._dirty = True  # watchers wake when the batch is applied (batch())
        self._bump_landed()  # an overwrite may have replaced a reserved location
        return ("ok", version)

    def _reserve(
        self,
        partition_id: str,
        keys: Sequence[str],
        tags: Sequence[dict[str, Any]] | None,
        token: str,
        fields: Sequence[str],
    ) -> Reply:
        return self._put(partition_id, keys, tags, [Reserved(token, time.monotonic())], fields)

    def _commit(self, token: str, handle_box: list[Any] | None, failure: str | None) -> Reply:
        handle = handle_box[0] if handle_box else Failed(failure or "no data arrived")
        landed = self._index.commit(token, handle)
        self._bump_landed()
        return ("ok", landed)

    def _locate(self, partition_id: str, keys: Sequence[str], fields: Sequence[str]) -> Reply:
        located = self._index.locate(partition_id, keys, fields)
        waiting = KeyIndex.reserved_in(located)
        if waiting:
            return ("pending", waiting)  # batch() waits for the commits and locates again
        boxed = {bid: [h] for bid, h in located.handles.items()}
        return ("ok", (boxed, located.locs))

    def _list(self, partition_id: str) -> Reply:
        return ("ok", self._index.list(partition_id))

    def _clear(self, partition_id: str, keys: Sequence[str]) -> Reply:
        self._index.clear(partition_id, keys)
        self._dirty = True
        self._bump_landed()
        return ("ok", None)

    def _block_count(self) -> Reply:
        return ("ok", self._index.block_count())

    def _stats(self) -> Reply:
        # How well concurrent callers share round trips, and the CPU time this actor's
        # process has used (tests and the benchmarks read them).
        return ("ok", {"batches": self._batches, "calls": self._calls,
                       "cpu_s": time.process_time()})

    # What a batch may run (``watch`` parks, so it never joins one).
    _OPS: ClassVar[dict[str, Any]] = {
        "put": _put,
        "reserve": _reserve,
        "commit": _commit,
        "locate": _locate,
        "list": _list,
        "clear": _clear,
        "block_count": _block_count,
        "stats": _stats,
    }

    def _apply(self, op: str, args: Sequence[Any]) -> Reply:
        method = self._OPS.get(op)
        if method is None:
            return ("err", DataPlaneError(f"the index actor has no operation {op!r}"))
        try:
            return method(self, *args)
        except DataPlaneError as exc:
            return ("err", exc)

    async def batch(
        self, ops: Sequence[tuple[str, Sequence[Any]]], pending_wait_s: float = 0.0
    ) -> list[Reply]:
        """Apply ``ops`` (``(name, args)``) in order within one event-loop turn: the calls of
        several client threads cost one round trip, and no other call runs in between.

        The one exception: a ``locate`` of a reserved block parks the batch until the block's
        commit (at most ``pending_wait_s``); the calls after it run when it is answered."""
        self._batches += 1
        self._calls += len(ops)
        replies = []
        for op, args in ops:
            reply = self._apply(op, args)
            if reply[0] == "pending":
                if self._dirty:  # what was applied so far is visible to watchers now
                    self._bump()
                reply = await self._after_commit(op, args, reply[1], pending_wait_s)
            replies.append(reply)
        if self._dirty:  # one wake for the whole batch: its puts are one index update
            self._bump()
        return replies

    async def _after_commit(
        self, op: str, args: Sequence[Any], waiting: list[Reserved], wait_s: float
    ) -> Reply:
        """Re-apply a read each time a reserved block may have landed, until it answers."""
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                age = time.monotonic() - min(r.since for r in waiting)
                return (
                    "err",
                    DataPlaneError(
                        f"{len(waiting)} block(s) this read needs were registered {age:.0f} s "
                        "ago and their bytes never arrived: the writer died or stalled between "
                        "registering a put and storing it (its own error, if any, is in its log)"
                    ),
                )
            if self._landed is None:
                self._landed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._landed.wait(), remaining)
            reply = self._apply(op, args)
            if reply[0] != "pending":
                return reply
            waiting = reply[1]

    async def watch(self, partition_id: str, version: int, timeout: float) -> Reply:
        await self._wait_past(partition_id, version, timeout)
        return ("ok", self._index.version(partition_id))

    async def watch_changes(self, partition_id: str, since: int, timeout: float) -> Reply:
        """What changed since ``since``, once something did (or at ``timeout``): a
        :class:`~rlctl.dataplane.contract.TagChanges`."""
        if since <= self._index.version(partition_id):  # not a version of the future
            await self._wait_past(partition_id, since, timeout)
        # No await between the wait and the answer: the changes are of exactly that version.
        return ("ok", self._index.changes(partition_id, since))

    async def _wait_past(self, partition_id: str, version: int, timeout: float) -> None:
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


def unwrap(reply: Reply) -> Any:
    """The value of an index reply, or raise the data-plane error it carries."""
    status, value = reply
    if status == "err":
        raise value
    return value


def call(ref: Any, timeout: float, what: str, *, raw: bool = False) -> Any:
    """``ray.get`` an index call with a timeout; actor death and timeouts become clear errors.

    Returns the reply's value (its error raised), or with ``raw`` the result as it came.
    """
    try:
        result = ray.get(ref, timeout=timeout)
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
    return result if raw else unwrap(result)


def get_or_create(name: str, namespace: str) -> Any:
    """The named index actor of a run, created on first use (owned by the caller's job) on
    the caller's node: the controller creates it, so the run's index lives with the run's
    controller, never on a worker node whose loss would take every stored key with it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return IndexActor.options(
        name=name, namespace=namespace, get_if_exists=True, num_cpus=0, max_concurrency=1000,
        scheduling_strategy=here,
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

    def _index_call(self, op: str, *args: Any, what: str = "") -> Any:
        """``op(*args)`` in the index actor, batched with this process's concurrent calls."""
        batches = self.__dict__.get("_batches")
        if batches is None:  # one per handle; setdefault keeps a single one under races
            # A queued call waits for the batch in flight, then its own (each bounded by
            # the call timeout), plus slack.
            wait_s = 2 * self.options.call_timeout_s + 30
            batches = self.__dict__.setdefault("_batches", GroupCommit(self._send_batch, wait_s))
        return unwrap(batches.call((op, args), what or op))

    def _pending_wait_s(self) -> float:
        # A read parked on a reserved block answers (with the stalled writer named) before
        # the caller's own timeout turns it into a bare "did not answer".
        return 0.8 * self.options.call_timeout_s

    def _send_batch(self, ops: list[tuple[str, tuple[Any, ...]]], what: str) -> list[Reply]:
        try:
            ref = self._index.batch.remote(ops, self._pending_wait_s())
        except TypeError:
            # One caller's arguments do not serialise: send each on its own so that only that
            # caller gets the error, not every thread that happened to share its batch.
            if len(ops) == 1:
                raise
            return [_reply_or_error(self._send_batch, op, what) for op in ops]
        return call(ref, self.options.call_timeout_s, what, raw=True)

    def _index_put(self, partition_id: str, keys: list[str], tags, box, names: list[str]) -> None:
        """Register ``keys``' fields ``names`` (block handle in ``box``) and a copy of their
        tags."""
        self._index_call("put", partition_id, keys, copied_tags(tags), box, names)

    def kv_list(self, partition_id: str) -> dict[str, dict[str, Any]]:
        self._check_open()
        return self._index_call("list", partition_id)

    def index_stats(self) -> dict[str, float]:
        """``{"batches", "calls", "cpu_s"}``: the batches and calls the index actor received
        (calls / batches is how many calls shared a round trip on average) and the CPU
        seconds its process has used (tests and the benchmarks read them)."""
        return self._index_call("stats")

    def kv_watch(self, partition_id: str, version: int, timeout: float) -> int:
        self._check_open()
        return call(
            self._index.watch.remote(partition_id, version, timeout),
            timeout + self.options.call_timeout_s,
            "watch",
        )

    def kv_watch_changes(self, partition_id: str, since: int, timeout: float) -> TagChanges:
        self._check_open()
        return call(
            self._index.watch_changes.remote(partition_id, since, timeout),
            timeout + self.options.call_timeout_s,
            "watch",
        )

    def _end_index(self) -> None:
        """End the index actor (freeing every block it holds)."""
        # The actor may already be gone with its cluster (ray.shutdown before close).
        with contextlib.suppress(ValueError, ray.exceptions.RayError):
            ray.kill(self._index)


def copied_tags(tags: Any) -> list[dict[str, Any]] | None:
    """The tags a put sends: one plain dict per key (a copy, so later edits cannot leak in)."""
    return None if tags is None else [dict(t) for t in tags]


def _reply_or_error(send: Any, op: tuple[str, tuple[Any, ...]], what: str) -> Reply:
    try:
        return send([op], what)[0]
    except TypeError as exc:
        return ("err", exc)


def reconnect(cls: type, options: Any, run_id: str, index: Any) -> Any:
    """Unpickle a plane handle: a ``cls`` attached to the same index actor."""
    return cls(options, run_id=run_id, _index=index)
