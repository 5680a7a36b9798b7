"""The ray backend across processes: Ray actors hold unpickled planes and write; the driver
reads and samples. Readiness must reach the driver from another process."""

import time

import pytest
import ray
import torch

from rlctl.dataplane.replay_buffer import ReplayBuffer
from rlctl.protocol.kv import make_key, new_uid

pytestmark = pytest.mark.slow


@ray.remote(num_cpus=0)
class Writer:
    def __init__(self, plane):
        self.plane = plane  # arrives pickled: reconnects to the same index actor

    def write(self, partition, keys):
        for key in keys:
            seed = sum(map(ord, key))
            x = torch.randint(0, 1000, (16,), generator=torch.Generator().manual_seed(seed))
            self.plane.kv_put(
                key,
                partition,
                {"x": x, "r": [torch.arange(seed % 7 + 1)]},
                {"status": "success", "writer": key[:4]},
            )
        return len(keys)

    def finish(self, key, partition):
        self.plane.kv_put(
            key, partition, {"x": torch.zeros(16, dtype=torch.int64)}, {"status": "success"}
        )
        return time.time()


def expected_x(key):
    return torch.randint(
        0, 1000, (16,), generator=torch.Generator().manual_seed(sum(map(ord, key)))
    )


def test_actors_write_concurrently_driver_reads_everything(ray_plane_session):
    plane = ray_plane_session
    partition = f"xp{new_uid()[:8]}"
    writers = [Writer.remote(plane) for _ in range(4)]
    keys = [[make_key(new_uid(), s, 0) for s in range(100)] for _ in writers]
    assert (
        sum(
            ray.get(
                [w.write.remote(partition, k) for w, k in zip(writers, keys, strict=True)],
                timeout=300,
            )
        )
        == 400
    )
    flat = [k for ks in keys for k in ks]
    assert set(plane.kv_list(partition)) == set(flat)
    td = plane.kv_batch_get(flat, partition, ["x", "r"])
    for key, row, r in zip(flat, td.get("x"), td.get("r").unbind(), strict=True):
        assert torch.equal(row, expected_x(key))
        assert len(r) == sum(map(ord, key)) % 7 + 1
    plane.kv_clear(flat, partition)
    for w in writers:
        ray.kill(w)


def test_readiness_is_pushed_from_another_process(ray_plane_session):
    plane = ray_plane_session
    buffer = ReplayBuffer(plane)
    writer = Writer.remote(plane)
    latencies = []
    for step in range(3):
        uid = new_uid()
        buffer.add("train", [(uid, 1, step)])
        ref = writer.finish.remote(make_key(uid, 0, 0), "train")
        meta = buffer.sample("train", step, timeout=60)
        latencies.append(time.time() - ray.get(ref))
        assert list(meta.keys) == [make_key(uid, 0, 0)]
        plane.kv_clear(meta.keys, "train")
        buffer.remove("train", meta.keys)
    assert min(latencies) < 0.1, latencies  # a notification, not a polling period
    ray.kill(writer)


def test_zero_copy_reads_and_clear_releases_blocks(ray_cluster):
    from rlctl.dataplane import open_data_plane

    plane = open_data_plane("ray", {"zero_copy_reads": True}, run_id=f"zc{new_uid()[:8]}")
    try:
        keys = [make_key(new_uid(), 0, 0) for _ in range(8)]
        x = torch.randn(8, 32)
        rows = [torch.arange(i + 1) for i in range(8)]
        plane.kv_batch_put(keys, "train", {"x": x, "r": rows})
        plane.kv_batch_put(keys, "train", {"y": x * 2})  # a second block
        td = plane.kv_batch_get(keys, "train", ["x", "r", "y"])
        assert torch.equal(td.get("x"), x) and torch.equal(td.get("y"), x * 2)
        assert [r.tolist() for r in td.get("r").unbind()] == [r.tolist() for r in rows]
        assert plane.block_count() == 2
        plane.kv_batch_put(keys, "train", {"y": x})  # overwrite: the old y block is released
        assert plane.block_count() == 2
        plane.kv_clear(keys, "train")
        assert plane.block_count() == 0
    finally:
        plane.close()
