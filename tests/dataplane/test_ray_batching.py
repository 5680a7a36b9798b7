"""The ray backend's round-trip savings: small blocks ride in the index call, and index calls
that one process's threads make at the same time share a batch. Both must change no value."""

from __future__ import annotations

import threading
import time

import pytest
import ray
import torch

from rlctl.dataplane.contract import DataPlaneError
from rlctl.protocol.kv import make_key, new_uid

pytestmark = pytest.mark.slow


def _open(**options):  # type: ignore[no-untyped-def]
    from rlctl.dataplane import open_data_plane

    return open_data_plane("ray", options, run_id=f"rb{new_uid()[:8]}")


@pytest.mark.parametrize("inline_max_bytes", [0, 65536, 1 << 30], ids=["store", "small", "all"])
def test_inline_and_object_store_blocks_read_back_the_same(ray_cluster, inline_max_bytes):
    plane = _open(inline_max_bytes=inline_max_bytes)
    try:
        keys = [make_key(new_uid(), i, 0) for i in range(6)]
        small = torch.arange(6 * 4).reshape(6, 4)  # 192 B: inline unless the limit is 0
        big = torch.randn(6, 8192)  # 192 KiB: inline only with the 1 GiB limit
        rows = [torch.arange(i + 2) for i in range(6)]
        plane.kv_batch_put(keys, "p", {"small": small, "rows": rows})
        plane.kv_batch_put(keys, "p", {"big": big}, [{"status": "success"}] * 6)
        order = [4, 1, 5, 0]
        td = plane.kv_batch_get([keys[i] for i in order], "p", ["small", "rows", "big"])
        assert torch.equal(td.get("small"), small[order])
        assert torch.equal(td.get("big"), big[order])
        assert [r.tolist() for r in td.get("rows").unbind()] == [rows[i].tolist() for i in order]
        padded = plane.kv_batch_get(keys, "p", ["rows"], layout="padded", pad_value=-1).get("rows")
        assert padded.shape == (6, 7) and padded[0].tolist() == [0, 1, -1, -1, -1, -1, -1]
        td.get("small").add_(1)  # reads are fresh tensors: the stored block is unchanged
        assert torch.equal(plane.kv_batch_get(keys, "p", ["small"]).get("small"), small)
        assert plane.block_count() == 2
        plane.kv_clear(keys, "p")
        assert plane.block_count() == 0
    finally:
        plane.close()


def test_concurrent_threads_share_index_round_trips(ray_cluster):
    plane = _open()
    try:
        before = plane.index_stats()
        errors: list[BaseException] = []
        start = threading.Barrier(8)

        def writer(w: int) -> None:
            start.wait()
            try:
                for i in range(40):
                    key = make_key(f"w{w}", i, 0)
                    plane.kv_put(key, "p", {"x": torch.tensor([w, i])}, {"status": "success"})
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert errors == [] and not any(t.is_alive() for t in threads)
        after = plane.index_stats()
        calls = after["calls"] - before["calls"] - 1  # minus the stats call itself
        batches = after["batches"] - before["batches"] - 1
        assert calls == 320
        assert batches < 0.8 * calls, (batches, calls)  # 8 writers: most calls rode along
        keys = [make_key(f"w{w}", i, 0) for w in range(8) for i in range(40)]
        got = plane.kv_batch_get(keys, "p", ["x"]).get("x")
        assert got.tolist() == [[w, i] for w in range(8) for i in range(40)]
        assert all(t == {"status": "success"} for t in plane.kv_list("p").values())
    finally:
        plane.close()


def test_a_put_that_cannot_be_sent_fails_alone(ray_cluster):
    plane = _open()
    try:
        outcome: dict[int, str] = {}
        start = threading.Barrier(6)

        def writer(w: int) -> None:
            start.wait()
            tag = {"lock": threading.Lock()} if w == 0 else {"w": w}  # a lock does not pickle
            try:
                for i in range(10):
                    plane.kv_put(make_key(f"w{w}", i, 0), "p", tag=tag)
                outcome[w] = "ok"
            except TypeError as exc:
                outcome[w] = f"TypeError: {exc}"

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert outcome[0].startswith("TypeError"), outcome[0]
        assert all(outcome[w] == "ok" for w in range(1, 6)), outcome
        listed = plane.kv_list("p")
        assert len(listed) == 50 and not any(k.startswith("w0") for k in listed)
    finally:
        plane.close()


def test_errors_of_batched_gets_reach_their_own_caller(ray_cluster):
    plane = _open()
    try:
        key = make_key(new_uid(), 0, 0)
        plane.kv_put(key, "p", {"x": torch.tensor([1])})
        with pytest.raises(DataPlaneError, match="no key"):
            plane.kv_batch_get([make_key(new_uid(), 0, 0)], "p", ["x"])
        with pytest.raises(DataPlaneError, match="field 'y' is not written"):
            plane.kv_batch_get([key], "p", ["y"])
        assert plane.kv_batch_get([key], "p", ["x"]).get("x").tolist() == [[1]]
    finally:
        plane.close()


@ray.remote(num_cpus=0)
class _ShortLivedWriter:
    def __init__(self, plane):
        self.plane = plane

    def put(self, keys, fields):
        self.plane.kv_batch_put(keys, "p", fields, [{"status": "success"}] * len(keys))


def _put_from_an_actor_that_exits(plane, keys, fields) -> None:
    writer = _ShortLivedWriter.remote(plane)
    ray.get(writer.put.remote(keys, fields), timeout=60)
    ray.kill(writer)  # an object-store block dies with its owner; an inline one does not
    time.sleep(1.0)


def test_string_fields_ride_inline_and_other_objects_go_through_the_store(ray_cluster):
    """A step's prompts (token ids plus JSON strings) are one index call: the index actor holds
    the block, so it outlives the process that put it. A field of other Python objects never
    rides inline (the actor might not import their classes): that block is in its writer's
    object store and goes when the writer goes."""
    plane = _open()
    try:
        prompts = [make_key(new_uid(), 0, 0) for _ in range(4)]
        fields = {"prompt_ids": [torch.arange(i + 3) for i in range(4)],
                  "ground_truth": ['{"digits": 3}', '{"digits": 1}', "{}", '"é"'],
                  "data_source": ["count_digits"] * 4}
        _put_from_an_actor_that_exits(plane, prompts, fields)
        td = plane.kv_batch_get(prompts, "p", ["prompt_ids", "ground_truth", "data_source"])
        assert [r.tolist() for r in td.get("prompt_ids").unbind()] == [
            list(range(i + 3)) for i in range(4)]
        assert list(td.get("ground_truth").tolist()) == fields["ground_truth"]

        others = [make_key(new_uid(), 0, 0) for _ in range(2)]
        _put_from_an_actor_that_exits(plane, others, {"meta": [{"a": 1}, {"b": 2}]})
        with pytest.raises(DataPlaneError, match="written by a process that has exited"):
            plane.kv_batch_get(others, "p", ["meta"])
    finally:
        plane.close()
