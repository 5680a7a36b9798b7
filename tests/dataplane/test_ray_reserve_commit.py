"""The ray plane's two-call put: keys reserved before the copy, the block committed after.

A read that lands in between must wait for the bytes (never see a half-registered put), a
writer that never commits must fail its readers within the bound, and a copy that fails must
reach the readers as an error, not as a wait."""

from __future__ import annotations

import threading
import time

import pytest
import ray
import torch

from rlctl.dataplane import columns
from rlctl.dataplane.contract import DataPlaneError
from rlctl.protocol.kv import make_key, new_uid

pytestmark = pytest.mark.slow


def _open(**options):  # type: ignore[no-untyped-def]
    from rlctl.dataplane import open_data_plane

    return open_data_plane("ray", {"inline_max_bytes": 0, **options}, run_id=f"rc{new_uid()[:8]}")


def _reserve(plane, keys: list[str], token: str) -> None:
    reply = ray.get(plane._index.batch.remote([("reserve", ("p", keys, None, token, ["x"]))]))
    assert reply[0][0] == "ok"


def test_a_read_between_reserve_and_commit_waits_for_the_bytes(ray_cluster):
    plane = _open()
    try:
        keys = [make_key(new_uid(), i, 0) for i in range(4)]
        x = torch.arange(4 * 3).reshape(4, 3)
        _reserve(plane, keys, "tok")
        assert set(plane.kv_list("p")) == set(keys)  # the keys exist at once
        got: dict[str, torch.Tensor] = {}
        reader = threading.Thread(
            target=lambda: got.update(x=plane.kv_batch_get(keys[::-1], "p", ["x"]).get("x"))
        )
        reader.start()
        time.sleep(0.5)
        assert reader.is_alive() and not got  # parked in the index actor, not answered
        box = [ray.put(columns.to_numpy(columns.encode({"x": x}, 4)))]
        ray.get(plane._index.batch.remote([("commit", ("tok", box, None))]))
        reader.join(timeout=60)
        assert torch.equal(got["x"], x.flip(0))
    finally:
        plane.close()


def test_a_writer_that_never_commits_fails_its_readers_within_the_bound(ray_cluster):
    plane = _open(call_timeout_s=2.0)  # a parked read waits 0.8 x 2 s
    try:
        keys = [make_key(new_uid(), 0, 0)]
        _reserve(plane, keys, "lost")
        t0 = time.monotonic()
        with pytest.raises(DataPlaneError, match="bytes never arrived: the writer died"):
            plane.kv_batch_get(keys, "p", ["x"])
        assert 1.0 < time.monotonic() - t0 < 10
        plane.kv_clear(keys, "p")  # the stalled keys can be cleared, freeing the reservation
        assert plane.block_count() == 0
    finally:
        plane.close()


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RuntimeError("object store full"), "RuntimeError: object store full"),
        (KeyboardInterrupt(), "the writer was interrupted mid-put"),  # a SIGINT or SIGTERM
    ],
    ids=["error", "interrupt"],
)
def test_a_put_whose_copy_fails_reaches_its_readers_as_an_error(
    ray_cluster, monkeypatch, error, reason
):
    plane = _open()
    try:
        keys = [make_key(new_uid(), i, 0) for i in range(2)]

        def failing_put(value, **_):  # type: ignore[no-untyped-def]
            raise error

        monkeypatch.setattr(ray, "put", failing_put)
        with pytest.raises(type(error)):
            plane.kv_batch_put(keys, "p", {"x": torch.zeros(2, 3)}, [{"status": "success"}] * 2)
        monkeypatch.undo()
        t0 = time.monotonic()
        with pytest.raises(DataPlaneError, match=f"never stored.*{reason}"):
            plane.kv_batch_get(keys, "p", ["x"])
        assert time.monotonic() - t0 < 10  # answered, not waited out
        plane.kv_batch_put(keys, "p", {"x": torch.ones(2, 3)})  # and a retry repairs them
        assert plane.kv_batch_get(keys, "p", ["x"]).get("x").sum().item() == 6
    finally:
        plane.close()


def test_a_clear_during_the_copy_frees_the_late_block(ray_cluster):
    plane = _open()
    try:
        keys = [make_key(new_uid(), 0, 0)]
        _reserve(plane, keys, "tok")
        plane.kv_clear(keys, "p")
        box = [ray.put(columns.to_numpy(columns.encode({"x": torch.zeros(1, 2)}, 1)))]
        reply = ray.get(plane._index.batch.remote([("commit", ("tok", box, None))]))
        assert reply == [("ok", False)]  # nothing held it: dropped with the reply
        assert plane.block_count() == 0
    finally:
        plane.close()
