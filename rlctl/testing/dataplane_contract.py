"""The data-plane contract as a pytest class: every backend, built-in or third-party, runs it.

Use it from a test module of your backend::

    import pytest
    from rlctl.testing.dataplane_contract import DataPlaneContract

    class TestMyPlane(DataPlaneContract):
        multi_process = True            # False if pickling your plane must raise

        @pytest.fixture
        def plane(self):
            plane = MyPlane(...)
            yield plane
            plane.close()

What a watcher of a partition relies on is the delta contract of ``kv_watch_changes``
(checked by :class:`~rlctl.testing.dataplane_changes.ListingChangesContract`, this class's
base): the version moves exactly when the listing changes (a key created, a non-empty tag
put, a clear); ``kv_watch_changes(partition, since, timeout)`` waits while the version is
``since`` and answers a ``TagChanges`` of the current version with only what changed since
``since`` -- each key created or re-tagged with its whole tags, each key cleared -- or a
snapshot (``complete``) from ``-1``, from a version the plane never issued, or from one older
than the history it keeps; applied to a copy of the listing at ``since``, it gives ``kv_list``
of the new version, under concurrent writers too. ``kv_list`` stays the full listing, for
tools. A plane that keeps ``DataPlaneBase``'s snapshot default sets
``incremental_changes = False``.

Every test works in its own fresh partition, so ``plane`` may be shared (e.g. a
session-scoped backend behind a function-scoped fixture). Errors are checked by their type
(:mod:`rlctl.dataplane.errors`, imported from ``rlctl.dataplane``) and by the ``keys`` /
``field`` attributes of ``UnknownKeyError`` and ``MissingFieldError``, never by wording.
"""

from __future__ import annotations

import asyncio
import pickle
import random
import threading
import time
import uuid

import pytest
import torch
from tensordict import NonTensorStack

from rlctl.dataplane import (
    DataPlane,
    DuplicateKeyError,
    MissingFieldError,
    RowCountError,
    ShapeMismatchError,
    TagCountError,
    UnknownKeyError,
    jagged,
)
from rlctl.testing.dataplane_changes import ListingChangesContract
from rlctl.testing.dataplane_changes import keys_of_a_new_uid as _keys


def _ragged(n: int, seed: int, dtype=torch.int64) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randint(0, 100, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).to(dtype)
        for _ in range(n)
    ]


class DataPlaneContract(ListingChangesContract):
    """Round trips, column-wise puts, partitions, clear, errors, watch, concurrency."""

    multi_process: bool = True
    """Whether the backend can be pickled into another process (``memory`` cannot)."""
    concurrency_puts: int = 2000
    """Total puts of the concurrency test (8 writers share them)."""

    @pytest.fixture
    def plane(self):  # pragma: no cover - provided by the subclass
        raise NotImplementedError("subclass DataPlaneContract and provide a `plane` fixture")

    @pytest.fixture
    def partition(self) -> str:
        return f"p{uuid.uuid4().hex[:10]}"

    def test_the_plane_has_every_call_of_the_contract(self, plane):
        # kv_watch_changes and the async twins included (DataPlaneBase has defaults for them)
        assert isinstance(plane, DataPlane)

    # ------------------------------------------------------------------ round trips
    def test_dense_fields_round_trip_with_dtype(self, plane, partition):
        keys = _keys(6)
        fields = {
            "f32": torch.randn(6, 5),
            "i64": torch.arange(24).reshape(6, 4),
            "bf16": torch.randn(6, 3).to(torch.bfloat16),
            "flag": torch.tensor([True, False] * 3),
            "cube": torch.randn(6, 2, 3),
        }
        plane.kv_batch_put(keys, partition, fields)
        order = [3, 0, 5, 1]
        td = plane.kv_batch_get([keys[i] for i in order], partition, list(fields))
        assert td.batch_size == torch.Size([4])
        for name, value in fields.items():
            got = td.get(name)
            assert not got.is_nested, name
            assert got.dtype == value.dtype, name
            assert torch.equal(got, value[order]), name

    def test_jagged_round_trip_from_nested_and_list(self, plane, partition):
        keys = _keys(5)
        rows = _ragged(5, seed=1)
        logp = [torch.randn(len(r)) for r in rows]
        plane.kv_batch_put(keys, partition, {"responses": jagged.from_list(rows), "logp": logp})
        td = plane.kv_batch_get(keys[::-1], partition, ["responses", "logp"])
        nt = td.get("responses")
        assert jagged.is_jagged(nt)
        assert [r.tolist() for r in nt.unbind()] == [r.tolist() for r in rows[::-1]]
        assert jagged.lengths(nt).tolist() == [len(r) for r in rows[::-1]]
        assert all(
            torch.equal(a, b) for a, b in zip(td.get("logp").unbind(), logp[::-1], strict=True)
        )

    def test_padded_layout_right_pads_with_pad_value(self, plane, partition):
        keys = _keys(4)
        rows = [
            torch.tensor([1, 2, 3]),
            torch.tensor([4]),
            torch.tensor([5, 6]),
            torch.tensor([7, 8, 9, 10]),
        ]
        plane.kv_batch_put(keys, partition, {"r": rows, "dense": torch.ones(4, 2)})
        td = plane.kv_batch_get(keys, partition, ["r", "dense"], layout="padded", pad_value=-1)
        assert td.get("r").tolist() == [
            [1, 2, 3, -1],
            [4, -1, -1, -1],
            [5, 6, -1, -1],
            [7, 8, 9, 10],
        ]
        assert torch.equal(td.get("dense"), torch.ones(4, 2))  # dense fields are unaffected
        padded, mask = jagged.to_padded(jagged.from_list(rows), pad_value=-1)
        assert torch.equal(padded, td.get("r")) and mask.sum(1).tolist() == [3, 1, 2, 4]

    def test_scalars_and_non_tensor_fields(self, plane, partition):
        keys = _keys(3)
        objs = [{"answer": "4"}, {"answer": "7"}, {"answer": None}]
        plane.kv_batch_put(
            keys,
            partition,
            {
                "score": torch.tensor([0.5, 1.0, -1.0]),
                "text": ["a", "bb", "ccc"],
                "meta": NonTensorStack.from_list(objs),
            },
        )
        td = plane.kv_batch_get(keys, partition, ["score", "text", "meta"])
        assert td.get("score").shape == (3,) and td.get("score").tolist() == [0.5, 1.0, -1.0]
        assert td.get("text").tolist() == ["a", "bb", "ccc"]
        assert td.get("meta").tolist() == objs

    def test_single_key_put(self, plane, partition):
        a, b = _keys(2)
        plane.kv_put(
            a,
            partition,
            {"x": torch.tensor([1.0, 2.0]), "r": [torch.arange(3)], "s": "hi"},
            {"status": "running"},
        )
        plane.kv_put(
            b, partition, {"x": torch.tensor([3.0, 4.0]), "r": [torch.arange(5)], "s": "yo"}
        )
        td = plane.kv_batch_get([a, b], partition, ["x", "r", "s"])
        assert td.get("x").tolist() == [[1.0, 2.0], [3.0, 4.0]]
        assert jagged.lengths(td.get("r")).tolist() == [3, 5]
        assert td.get("s").tolist() == ["hi", "yo"]
        assert plane.kv_list(partition)[a] == {"status": "running"}

    def test_get_may_repeat_keys(self, plane, partition):
        # Trainers pad a shard to a fixed size by repeating its last key.
        keys = _keys(3)
        rows = _ragged(3, seed=3)
        plane.kv_batch_put(keys, partition, {"r": rows, "d": torch.arange(3), "s": ["a", "b", "c"]})
        want = [2, 0, 2, 2]
        td = plane.kv_batch_get([keys[i] for i in want], partition, ["r", "d", "s"])
        assert [r.tolist() for r in td.get("r").unbind()] == [rows[i].tolist() for i in want]
        assert td.get("d").tolist() == want
        assert td.get("s").tolist() == ["c", "a", "c", "c"]

    def test_empty_get_returns_empty_batch(self, plane, partition):
        td = plane.kv_batch_get([], partition, [])
        assert td.batch_size == torch.Size([0])

    # ------------------------------------------------------------------ columns, tags, partitions
    def test_column_wise_puts_and_field_level_reads(self, plane, partition):
        keys = _keys(4)
        rows = _ragged(4, seed=2)
        plane.kv_batch_put(keys, partition, {"responses": rows}, [{"status": "success"}] * 4)
        plane.kv_batch_put(
            keys[:2], partition, {"old_log_probs": [torch.randn(len(r)) for r in rows[:2]]}
        )
        plane.kv_batch_put(
            keys[2:], partition, {"old_log_probs": [torch.randn(len(r)) for r in rows[2:]]}
        )
        td = plane.kv_batch_get(keys, partition, ["old_log_probs"])
        assert set(td.keys()) == {"old_log_probs"}
        assert jagged.lengths(td.get("old_log_probs")).tolist() == [len(r) for r in rows]
        assert plane.kv_list(partition)[keys[0]] == {"status": "success"}  # field puts keep tags

    def test_overwrite_replaces_a_field(self, plane, partition):
        keys = _keys(2)
        plane.kv_batch_put(keys, partition, {"v": torch.zeros(2, 3)})
        plane.kv_batch_put(keys[1:], partition, {"v": torch.ones(1, 3)})
        assert plane.kv_batch_get(keys, partition, ["v"]).get("v").sum().item() == 3.0

    def test_tags_merge_and_listing_is_a_copy(self, plane, partition):
        keys = _keys(2)
        plane.kv_batch_put(
            keys, partition, tags=[{"status": "running", "global_step": 3}, {"status": "running"}]
        )
        plane.kv_put(keys[0], partition, tag={"status": "success", "seq_len": 12})
        listing = plane.kv_list(partition)
        assert list(listing) == keys
        assert listing[keys[0]] == {"status": "success", "global_step": 3, "seq_len": 12}
        listing[keys[0]]["status"] = "tampered"
        assert plane.kv_list(partition)[keys[0]]["status"] == "success"

    def test_partitions_are_isolated(self, plane, partition):
        other = partition + "x"
        keys = _keys(2)
        plane.kv_batch_put(keys, partition, {"v": torch.zeros(2)}, [{"p": 1}] * 2)
        plane.kv_batch_put(keys, other, {"v": torch.ones(2)}, [{"p": 2}] * 2)
        assert plane.kv_batch_get(keys, partition, ["v"]).get("v").tolist() == [0.0, 0.0]
        assert plane.kv_batch_get(keys, other, ["v"]).get("v").tolist() == [1.0, 1.0]
        plane.kv_clear(keys, other)
        assert plane.kv_list(other) == {} and len(plane.kv_list(partition)) == 2

    def test_clear_removes_data_and_tags_and_is_idempotent(self, plane, partition):
        keys = _keys(3)
        plane.kv_batch_put(keys, partition, {"v": torch.zeros(3)}, [{"s": 1}] * 3)
        plane.kv_clear(keys[:2], partition)
        plane.kv_clear(keys[:2] + ["never_0_0"], partition)
        assert list(plane.kv_list(partition)) == keys[2:]
        with pytest.raises(UnknownKeyError):
            plane.kv_batch_get(keys[:1], partition, ["v"])
        assert plane.kv_batch_get(keys[2:], partition, ["v"]).get("v").tolist() == [0.0]

    # ------------------------------------------------------------------ errors
    # Errors are checked by type and attributes (rlctl.dataplane.errors), never by wording:
    # the message is for people and a backend may phrase it as it likes.
    def test_unknown_key_is_named(self, plane, partition):
        keys = _keys(1)
        plane.kv_batch_put(keys, partition, {"v": torch.zeros(1)})
        with pytest.raises(UnknownKeyError) as err:
            plane.kv_batch_get(keys + ["ghost_0_0"], partition, ["v"])
        assert err.value.keys == ("ghost_0_0",)

    def test_missing_field_names_field_and_keys(self, plane, partition):
        keys = _keys(2)
        plane.kv_batch_put(keys, partition, {"v": torch.zeros(2)})
        plane.kv_batch_put(keys[:1], partition, {"w": torch.zeros(1)})
        with pytest.raises(MissingFieldError) as err:
            plane.kv_batch_get(keys, partition, ["v", "w"])
        assert (err.value.field, err.value.keys) == ("w", (keys[1],))
        with pytest.raises(MissingFieldError) as err:
            plane.kv_batch_get(keys, partition, ["nope"])
        assert (err.value.field, set(err.value.keys)) == ("nope", set(keys))

    def test_bad_puts_are_rejected(self, plane, partition):
        keys = _keys(3)
        with pytest.raises(RowCountError):
            plane.kv_batch_put(keys, partition, {"v": torch.zeros(2)})
        with pytest.raises(DuplicateKeyError):
            plane.kv_batch_put([keys[0], keys[0]], partition, {"v": torch.zeros(2)})
        with pytest.raises(TagCountError):
            plane.kv_batch_put(keys, partition, tags=[{}])
        assert plane.kv_list(partition) == {}  # a rejected put stores nothing

    def test_dense_shape_mismatch_across_puts_is_an_error_at_get(self, plane, partition):
        # each put is consistent in itself, so only the get that gathers both can tell
        keys = _keys(2)
        plane.kv_batch_put(keys[:1], partition, {"r": torch.zeros(1, 3)})
        plane.kv_batch_put(keys[1:], partition, {"r": torch.zeros(1, 5)})
        with pytest.raises(ShapeMismatchError):
            plane.kv_batch_get(keys, partition, ["r"])
        assert plane.kv_batch_get(keys[1:], partition, ["r"]).get("r").shape == (1, 5)

    # ------------------------------------------------------------------ async, pickling
    def test_async_twins(self, plane, partition):
        keys = _keys(2)

        async def go():
            await plane.async_kv_batch_put(keys, partition, {"v": torch.arange(2)}, [{"a": 1}] * 2)
            await plane.async_kv_put(keys[0], partition, None, {"b": 2})
            td = await plane.async_kv_batch_get(keys, partition, ["v"])
            listing = await plane.async_kv_list(partition)
            await plane.async_kv_clear(keys[1:], partition)
            assert await plane.async_kv_watch(partition, -1, 0) >= 0
            changes = await plane.async_kv_watch_changes(partition, -1, 0)
            assert changes.changed == {keys[0]: {"a": 1, "b": 2}}
            return td, listing, await plane.async_kv_list(partition)

        td, listing, after = asyncio.run(go())
        assert td.get("v").tolist() == [0, 1]
        assert listing[keys[0]] == {"a": 1, "b": 2}
        assert list(after) == keys[:1]

    def test_pickling(self, plane, partition):
        if not self.multi_process:
            with pytest.raises(TypeError):
                pickle.dumps(plane)
            return
        copy = pickle.loads(pickle.dumps(plane))
        keys = _keys(2)
        copy.kv_batch_put(keys, partition, {"v": torch.arange(2)}, [{"via": "copy"}] * 2)
        assert plane.kv_batch_get(keys, partition, ["v"]).get("v").tolist() == [0, 1]
        copy.close()  # a copy's close must not shut the store down
        assert plane.kv_list(partition)[keys[0]] == {"via": "copy"}

    # ------------------------------------------------------------------ concurrency
    def test_concurrent_writers_and_readers_lose_nothing(self, plane, partition):
        load = ConcurrentLoad(plane, partition, writers=8,
                              per_writer=max(1, self.concurrency_puts // 8))
        load.run()
        load.check()


def _payload(key: str) -> torch.Tensor:
    seed = int(uuid.uuid5(uuid.NAMESPACE_OID, key).int % 2**31)
    return torch.randint(0, 1000, (8,), generator=torch.Generator().manual_seed(seed))


class ConcurrentLoad:
    """8 writers (batch puts, and tag merges into shared keys), 8 readers checking values,
    and a follower keeping a copy of the listing current from ``kv_watch_changes``."""

    def __init__(self, plane, partition: str, writers: int, per_writer: int) -> None:
        self.plane, self.partition = plane, partition
        self.writers, self.per_writer = writers, per_writer
        self.shared = _keys(4, prefix="shared")
        self.errors: list[BaseException] = []
        self.written: list[list[str]] = [[] for _ in range(writers)]
        self.done = threading.Event()
        self.followed: dict[str, dict] = {}
        self.held = -1

    def _guard(self, body, *args) -> None:
        try:
            body(*args)
        except BaseException as exc:  # noqa: BLE001 (re-raised by the main thread)
            self.errors.append(exc)

    def _steps(self, w: int):
        """Writer ``w``'s batch sizes, the same on every call (the check replays them)."""
        rng, i = random.Random(w), 0
        while i < self.per_writer:
            n = min(rng.randint(1, 3), self.per_writer - i)
            yield i, n
            i += n

    def _write(self, w: int) -> None:
        for i, n in self._steps(w):
            keys = [f"w{w}k{i + j}_0_0" for j in range(n)]
            self.plane.kv_batch_put(keys, self.partition,
                                    {"x": torch.stack([_payload(k) for k in keys])},
                                    [{"writer": w}] * n)
            self.written[w].extend(keys)
            # every writer merges its own tag into the same shared keys
            shared = self.shared[(i + n) % len(self.shared)]
            self.plane.kv_put(shared, self.partition, tag={f"w{w}_{i + n}": i + n})

    def _read(self, r: int) -> None:
        rng = random.Random(100 + r)
        while not self.done.is_set():
            mine = list(self.written[rng.randrange(self.writers)])
            if not mine:
                time.sleep(0.001)
                continue
            keys = rng.sample(mine, min(4, len(mine)))
            got = self.plane.kv_batch_get(keys, self.partition, ["x"]).get("x")
            for k, row in zip(keys, got, strict=True):
                assert torch.equal(row, _payload(k)), f"corrupted value for {k}"

    def _follow(self) -> None:
        # What the ReplayBuffer does: keep a copy of the listing current from the changes.
        while not self.done.is_set():
            changes = self.plane.kv_watch_changes(self.partition, self.held, 0.2)
            changes.apply(self.followed)
            self.held = changes.version

    def run(self) -> None:
        writers = [threading.Thread(target=self._guard, args=(self._write, w))
                   for w in range(self.writers)]
        others = [threading.Thread(target=self._guard, args=(self._read, r))
                  for r in range(self.writers)]
        others.append(threading.Thread(target=self._guard, args=(self._follow,)))
        for t in writers + others:
            t.start()
        for t in writers:
            t.join(timeout=600)
        self.done.set()
        for t in others:
            t.join(timeout=60)
        assert not self.errors, self.errors[:3]

    def check(self) -> None:
        listing = self.plane.kv_list(self.partition)
        self.plane.kv_watch_changes(self.partition, self.held, 0).apply(self.followed)
        assert self.followed == listing  # the changes lost or repeated nothing
        expected = [k for keys in self.written for k in keys]
        assert len(expected) == len(set(expected)) == self.writers * self.per_writer
        assert set(expected) <= set(listing)
        got = self.plane.kv_batch_get(expected, self.partition, ["x"]).get("x")
        for k, row in zip(expected, got, strict=True):
            assert torch.equal(row, _payload(k)), f"corrupted value for {k}"
        # no lost tag update: every merge into the shared keys survived
        merged = {name for k in self.shared for name in listing[k]}
        want = {f"w{w}_{i + n}" for w in range(self.writers) for i, n in self._steps(w)}
        assert want <= merged, f"{len(want - merged)} tag updates were lost"
