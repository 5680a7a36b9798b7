"""ReplayBuffer: success, failure, timeout and variable n, on the memory backend (fast)."""

import threading
import time

import pytest
import torch

from rlctl.dataplane import open_data_plane
from rlctl.dataplane.contract import DataPlaneBase
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
    counting = _Counting(plane)  # counts the watch's answers: pushed, not polled
    buffer = ReplayBuffer(counting)
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
    waiter = threading.Thread(target=lambda: result.update(meta=buffer.sample("train", 7,
                                                                             timeout=30)))
    waiter.start()
    assert counting.answered.wait(timeout=30)
    time.sleep(0.2)
    assert waiter.is_alive(), "sample returned before the last sample was terminal"
    waits_before_the_put = counting.answers
    put_sample(plane, keys[-1], "success")
    waiter.join(timeout=10)
    meta = result["meta"]
    assert list(meta.keys) == keys  # uid order as added, then session, index
    assert all(t["status"] == "success" for t in meta.tags)
    # Pushed, not polled: 0.2 s of waiting with nothing put is one blocked watch (a poller
    # would have answered many times), and the last put wakes it once.
    assert waits_before_the_put <= 2 and counting.answers <= waits_before_the_put + 2


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


def test_a_multi_output_session_stays_done_until_its_last_terminal_output_goes(plane):
    buffer = ReplayBuffer(plane)
    uid = new_uid()
    buffer.add("train", [(uid, 2, 0)])
    first, second, other = make_key(uid, 0, 0), make_key(uid, 0, 1), make_key(uid, 1, 0)
    plane.kv_batch_put([first, second, other], "train", tags=[{"status": "success"}] * 3)
    assert len(buffer.sample("train", 0, timeout=5)) == 3
    plane.kv_clear([first], "train")  # session 0 still has a terminal output
    assert list(buffer.sample("train", 0, timeout=5).keys) == [second, other]
    plane.kv_put(second, "train", tag={"status": "running"})  # and now it has none
    with pytest.raises(SampleTimeout, match=r"1/2 sessions"):
        buffer.sample("train", 0, timeout=0)
    plane.kv_put(first, "train", tag={"status": "success"})
    assert list(buffer.sample("train", 0, timeout=5).keys) == [first, second, other]


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


class _WatchAndList(DataPlaneBase):
    """A third-party plane with only ``kv_watch`` and ``kv_list``: it inherits the contract's
    default ``kv_watch_changes`` (a snapshot per wake)."""

    def __init__(self, inner):
        self.inner = inner
        self.answers = 0

    def kv_watch(self, partition, version, timeout):
        self.answers += 1
        return self.inner.kv_watch(partition, version, timeout)

    def kv_list(self, partition):
        return self.inner.kv_list(partition)


def test_a_plane_with_the_default_changes_is_woken_not_polled(plane):
    third_party = _WatchAndList(plane)
    buffer = ReplayBuffer(third_party)
    uid = new_uid()
    buffer.add("train", [(uid, 2, 0)])
    for session, delay in ((0, 0.05), (1, 0.3)):
        threading.Timer(delay, put_sample, args=(plane, make_key(uid, session, 0),
                                                 "success")).start()
    t0 = time.monotonic()
    meta = buffer.sample("train", 0, timeout=10)
    assert list(meta.keys) == [make_key(uid, 0, 0), make_key(uid, 1, 0)]
    assert 0.25 < time.monotonic() - t0 < 5
    assert third_party.answers < 20  # woken by the puts, not a polling loop


class _Counting(DataPlaneBase):
    """The memory plane, counting the keys its ``kv_watch_changes`` answers carry."""

    def __init__(self, inner):
        self.inner = inner
        self.keys_answered = 0
        self.answers = 0
        self.answered = threading.Event()  # set once the first answer is out

    def kv_watch(self, partition, version, timeout):
        return self.inner.kv_watch(partition, version, timeout)

    def kv_list(self, partition):
        return self.inner.kv_list(partition)

    def kv_watch_changes(self, partition, since, timeout):
        changes = self.inner.kv_watch_changes(partition, since, timeout)
        self.answers += 1
        self.keys_answered += len(changes.changed) + len(changes.removed)
        self.answered.set()
        return changes


def test_following_a_step_costs_each_change_once_not_the_partition_per_put(plane):
    """One put per session while ``sample`` waits (the quadratic case of a listing per wake):
    the answers carry each sample once (its running and its terminal put), however many
    wakes there were."""
    counting = _Counting(plane)
    buffer = ReplayBuffer(counting)
    uids = [new_uid() for _ in range(100)]
    buffer.add("train", [(u, 8, 0) for u in uids])
    keys = [make_key(u, s, 0) for u in uids for s in range(8)]

    def rollout() -> None:
        # Not before sample's first look: on a busy machine this thread could otherwise put
        # everything before sample starts, and one answer would hold the whole step.
        assert counting.answered.wait(timeout=60)
        for key in keys:
            plane.kv_put(key, "train", tag={"status": "running"})
        for key in reversed(keys):
            plane.kv_put(key, "train", tag={"status": "success", "seq_len": 3})

    writer = threading.Thread(target=rollout)
    writer.start()
    meta = buffer.sample("train", 0, timeout=60)
    writer.join(timeout=60)
    assert list(meta.keys) == keys and all(t["status"] == "success" for t in meta.tags)
    assert counting.keys_answered <= 2 * len(keys)
    assert counting.answers >= 2  # it did follow the step as it filled


def test_samples_put_before_their_uid_was_added_are_found(plane):
    """A restored checkpoint puts samples back before the buffer expects their uids."""
    buffer = ReplayBuffer(plane)
    early, later = new_uid(), new_uid()
    buffer.add("train", [(early, 1, 0)])
    put_sample(plane, make_key(early, 0, 0), "success")
    put_sample(plane, make_key(later, 0, 0), "success")
    put_sample(plane, make_key(later, 1, 0), "success")
    assert list(buffer.sample("train", 0, timeout=5).keys) == [make_key(early, 0, 0)]
    buffer.add("train", [(later, 2, 1)])  # the view already holds its samples
    assert list(buffer.sample("train", 1, timeout=0).keys) == [
        make_key(later, 0, 0), make_key(later, 1, 0)]


def test_a_uid_added_again_moves_to_its_new_step_and_count(plane):
    buffer = ReplayBuffer(plane)
    uid = new_uid()
    buffer.add("train", [(uid, 1, 0)])
    buffer.add("train", [(uid, 2, 1)])
    with pytest.raises(ValueError, match="no uid was added for step 0"):
        buffer.sample("train", 0, timeout=0)
    put_sample(plane, make_key(uid, 0, 0), "success")
    with pytest.raises(SampleTimeout, match=r"1/2 sessions"):
        buffer.sample("train", 1, timeout=0.1)
    assert buffer.pending("train") == {uid: 1}


def test_cleared_and_overwritten_samples_leave_the_view(plane):
    """A failure that is cleared and put again as a success no longer fails the step, and a
    cleared sample no longer counts as done."""
    buffer = ReplayBuffer(plane)
    uid = new_uid()
    buffer.add("train", [(uid, 2, 0)])
    first, second = make_key(uid, 0, 0), make_key(uid, 1, 0)
    put_sample(plane, first, "success")
    put_sample(plane, second, "failure", error="boom")
    with pytest.raises(RolloutFailure):
        buffer.sample("train", 0, timeout=0)
    plane.kv_clear([second], "train")
    with pytest.raises(SampleTimeout, match=r"1/2 sessions"):
        buffer.sample("train", 0, timeout=0)
    put_sample(plane, second, "success")
    assert list(buffer.sample("train", 0, timeout=5).keys) == [first, second]


def test_a_view_far_behind_many_clears_catches_up(plane):
    """More keys cleared than the plane remembers: the next answer is a snapshot."""
    buffer = ReplayBuffer(plane)
    old = [new_uid() for _ in range(400)]
    buffer.add("train", [(u, 8, 0) for u in old])
    keys = [make_key(u, s, 0) for u in old for s in range(8)]
    plane.kv_batch_put(keys, "train", tags=[{"status": "success"}] * len(keys))
    assert len(buffer.sample("train", 0, timeout=5)) == len(keys)
    plane.kv_clear(keys, "train")
    buffer.remove("train", keys)
    uid = new_uid()
    buffer.add("train", [(uid, 1, 1)])
    put_sample(plane, make_key(uid, 0, 0), "success")
    assert list(buffer.sample("train", 1, timeout=5).keys) == [make_key(uid, 0, 0)]
    buffer.add("train", [(old[0], 8, 2)])  # its samples were cleared: none are there
    with pytest.raises(SampleTimeout, match=r"0/8 sessions"):
        buffer.sample("train", 2, timeout=0)


def test_threads_sample_different_steps_at_once(plane):
    buffer = ReplayBuffer(plane)
    uids = {step: new_uid() for step in range(4)}
    buffer.add("train", [(u, 1, step) for step, u in uids.items()])
    got: dict[int, list[str]] = {}
    threads = [
        threading.Thread(target=lambda s=step: got.__setitem__(
            s, list(buffer.sample("train", s, timeout=30).keys)))
        for step in uids
    ]
    for t in threads:
        t.start()
    for step in reversed(uids):
        time.sleep(0.05)
        put_sample(plane, make_key(uids[step], 0, 0), "success")
    for t in threads:
        t.join(timeout=30)
    assert got == {step: [make_key(u, 0, 0)] for step, u in uids.items()}
