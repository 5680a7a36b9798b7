"""ReplayBuffer: success, failure, timeout and variable n, on the memory backend (fast)."""

import threading
import time

import pytest
import torch

from rlctl.dataplane import open_data_plane
from rlctl.dataplane.replay_buffer import ReplayBuffer, RolloutFailure, SampleTimeout
from rlctl.protocol.kv import make_key, new_uid


@pytest.fixture
def plane():
    p = open_data_plane("memory", {}, run_id="rb")
    yield p
    p.close()


def put_sample(plane, key, status, **tags):
    plane.kv_put(key, "train", {"responses": [torch.arange(3)]}, {"status": status, **tags})


def test_sample_waits_for_every_expected_sample_with_variable_n(plane):
    buffer = ReplayBuffer(plane)
    uids = [new_uid() for _ in range(3)]
    counts = [2, 4, 1]
    buffer.add("train", [(u, n, 7) for u, n in zip(uids, counts, strict=True)])
    buffer.add("train", [(new_uid(), 3, 8)])  # another step: not waited for
    plane.kv_put(uids[0], "train", tag={"status": "running"})  # a prompt marker is no sample
    keys = [make_key(u, s, 0) for u, n in zip(uids, counts, strict=True) for s in range(n)]
    for key in keys:
        put_sample(plane, key, "running")
    for key in keys[:-1]:
        put_sample(plane, key, "success")

    result = {}
    waiter = threading.Thread(
        target=lambda: result.update(meta=buffer.sample("train", 7, timeout=30), t=time.monotonic())
    )
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive(), "sample returned before the last sample was terminal"
    t_put = time.monotonic()
    put_sample(plane, keys[-1], "success")
    waiter.join(timeout=10)
    meta = result["meta"]
    assert list(meta.keys) == keys  # uid order as added, then session, index
    assert all(t["status"] == "success" for t in meta.tags)
    assert result["t"] - t_put < 0.5  # pushed, not polled


def test_multi_output_sessions_count_once(plane):
    buffer = ReplayBuffer(plane)
    uid = new_uid()
    buffer.add("train", [(uid, 2, 0)])  # n = 2 sessions; session 0 emits 3 outputs
    outputs = [make_key(uid, 0, i) for i in range(3)]
    plane.kv_batch_put(outputs, "train", {"r": [torch.arange(2)] * 3}, [{"status": "success"}] * 3)
    with pytest.raises(SampleTimeout, match=r"1/2 sessions"):
        buffer.sample("train", 0, timeout=0.2)
    put_sample(plane, make_key(uid, 1, 0), "success")
    assert list(buffer.sample("train", 0, timeout=5).keys) == [*outputs, make_key(uid, 1, 0)]


def test_failure_names_uid_and_error(plane):
    buffer = ReplayBuffer(plane)
    good, bad = new_uid(), new_uid()
    buffer.add("train", [(good, 1, 0), (bad, 2, 0)])
    put_sample(plane, make_key(good, 0, 0), "success")
    put_sample(plane, make_key(bad, 0, 0), "success")
    put_sample(plane, make_key(bad, 1, 0), "failure", error="reward server refused")
    with pytest.raises(RolloutFailure, match=rf"{bad}.*reward server refused") as info:
        buffer.sample("train", 0, timeout=5)
    assert set(info.value.failures) == {bad}


def test_timeout_names_missing_uids_and_never_hangs(plane):
    buffer = ReplayBuffer(plane)
    done, late = new_uid(), new_uid()
    buffer.add("train", [(done, 1, 3), (late, 2, 3)])
    put_sample(plane, make_key(done, 0, 0), "success")
    put_sample(plane, make_key(late, 0, 0), "success")
    put_sample(plane, make_key(late, 1, 0), "running")
    t0 = time.monotonic()
    with pytest.raises(SampleTimeout, match=rf"{late} \(1/2 sessions terminal\)") as info:
        buffer.sample("train", 3, timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 5
    assert info.value.missing == {late: (1, 2)}


def test_sample_without_added_uids_and_remove(plane):
    buffer = ReplayBuffer(plane)
    with pytest.raises(ValueError, match="no uid was added for step 1"):
        buffer.sample("train", 1, timeout=1)
    uid = new_uid()
    buffer.add("train", [(uid, 1, 1)])
    assert buffer.pending("train") == {uid: 1}
    buffer.remove("train", [make_key(uid, 0, 0)])
    assert buffer.pending("train") == {}
    with pytest.raises(ValueError, match="positive"):
        buffer.add("train", [(uid, 0, 1)])


class _NoWatch:
    """A third-party plane without kv_watch: the buffer falls back to short sleeps."""

    def __init__(self, inner):
        self.inner = inner

    def kv_list(self, partition):
        return self.inner.kv_list(partition)


def test_plane_without_watch_still_works(plane):
    buffer = ReplayBuffer(_NoWatch(plane))
    uid = new_uid()
    buffer.add("train", [(uid, 1, 0)])
    threading.Timer(0.05, put_sample, args=(plane, make_key(uid, 0, 0), "success")).start()
    assert list(buffer.sample("train", 0, timeout=5).keys) == [make_key(uid, 0, 0)]


class _WatchOnly(_NoWatch):
    """A plane with ``kv_watch`` but no ``kv_watch_list``: a watch, then a listing."""

    def kv_watch(self, partition, version, timeout):
        return self.inner.kv_watch(partition, version, timeout)


def test_plane_with_watch_but_no_watch_list_is_woken_not_polled(plane):
    buffer = ReplayBuffer(_WatchOnly(plane))
    uid = new_uid()
    buffer.add("train", [(uid, 2, 0)])
    for session, delay in ((0, 0.05), (1, 0.3)):
        threading.Timer(delay, put_sample, args=(plane, make_key(uid, session, 0),
                                                 "success")).start()
    t0 = time.monotonic()
    meta = buffer.sample("train", 0, timeout=10)
    assert list(meta.keys) == [make_key(uid, 0, 0), make_key(uid, 1, 0)]
    assert 0.25 < time.monotonic() - t0 < 5
