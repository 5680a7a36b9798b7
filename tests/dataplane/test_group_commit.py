"""Group commit of index calls: concurrent callers share a batch, each gets its own result,
a failed batch fails only its callers, and a queued caller's wait is bounded."""

from __future__ import annotations

import threading
import time

import pytest

from rlctl.dataplane.contract import DataPlaneError
from rlctl.dataplane.index_batch import GroupCommit


class Recorder:
    """A ``send`` that takes ``delay`` seconds per batch (a round trip) and records batches."""

    def __init__(self, delay: float = 0.0, fail_when: str | None = None) -> None:
        self.delay, self.fail_when = delay, fail_when
        self.batches: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, items: list[str], what: str) -> list[str]:
        with self.lock:
            self.batches.append(list(items))
        time.sleep(self.delay)
        if self.fail_when is not None and self.fail_when in items:
            raise DataPlaneError(f"batch with {self.fail_when} failed ({what})")
        return [f"{item}:done" for item in items]


def run_threads(n: int, target) -> list[BaseException]:  # type: ignore[no-untyped-def]
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def body(i: int) -> None:
        start.wait()
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a caller hung"
    return errors


def test_a_lone_caller_sends_each_call_on_its_own() -> None:
    send = Recorder()
    commit = GroupCommit(send, wait_s=10)
    assert [commit.call(f"c{i}", "put") for i in range(5)] == [f"c{i}:done" for i in range(5)]
    assert send.batches == [[f"c{i}"] for i in range(5)]


def test_concurrent_callers_share_batches_and_each_gets_its_own_result() -> None:
    send = Recorder(delay=0.05)
    commit = GroupCommit(send, wait_s=10)
    results: dict[str, str] = {}

    def caller(i: int) -> None:
        for j in range(10):
            item = f"t{i}-{j}"
            results[item] = commit.call(item, "put")

    assert run_threads(8, caller) == []
    assert results == {f"t{i}-{j}": f"t{i}-{j}:done" for i in range(8) for j in range(10)}
    sent = [item for batch in send.batches for item in batch]
    assert sorted(sent) == sorted(results)  # every call sent exactly once
    # 80 calls behind a 50 ms round trip: queued callers ride along instead of waiting
    # one round trip each (8 threads => about 10-11 batches, never anywhere near 80).
    assert len(send.batches) <= 40, [len(b) for b in send.batches]
    assert max(len(b) for b in send.batches) > 1
    for i in range(8):  # each thread's calls are applied in the order it made them
        mine = [item for item in sent if item.startswith(f"t{i}-")]
        assert mine == [f"t{i}-{j}" for j in range(10)]


def test_a_failed_batch_fails_its_callers_and_the_next_batch_still_goes() -> None:
    send = Recorder(delay=0.05, fail_when="bad")
    commit = GroupCommit(send, wait_s=10)
    outcome: dict[str, str] = {}

    def caller(i: int) -> None:
        item = "bad" if i == 0 else f"ok{i}"
        try:
            outcome[item] = commit.call(item, "put")
        except DataPlaneError as exc:
            outcome[item] = f"error: {exc}"

    assert run_threads(4, caller) == []
    failed_batch = next(b for b in send.batches if "bad" in b)
    for item, result in outcome.items():
        if item in failed_batch:
            assert result.startswith("error: batch with bad failed"), (item, result)
        else:
            assert result == f"{item}:done"
    assert commit.call("after", "put") == "after:done"  # the sending role was released


def test_a_queued_caller_gives_up_after_its_bound_and_is_never_sent() -> None:
    release = threading.Event()
    batches: list[list[str]] = []

    def send(items: list[str], what: str) -> list[str]:
        batches.append(list(items))
        if "slow" in items:
            release.wait(30)  # a round trip that outlives the queued caller's bound
        return [f"{i}:done" for i in items]

    commit = GroupCommit(send, wait_s=0.3)
    slow = threading.Thread(target=commit.call, args=("slow", "put"))
    slow.start()
    while not batches:
        time.sleep(0.01)
    t0 = time.monotonic()
    with pytest.raises(DataPlaneError, match="waited over"):
        commit.call("queued", "put")
    assert time.monotonic() - t0 < 5
    release.set()
    slow.join(timeout=30)
    assert commit.call("later", "put") == "later:done"
    assert ["queued"] not in batches and all("queued" not in b for b in batches)


def test_a_caller_whose_batch_outlives_its_bound_gets_an_error_not_a_crash() -> None:
    # A sends alone and holds the role; B and C queue; B is handed the role and sends [B, C],
    # which takes longer than C's bound: C gives up while its call is in flight.
    a_sent = threading.Event()
    release_a = threading.Event()

    def send(items: list[str], what: str) -> list[str]:
        if items == ["A"]:
            a_sent.set()
            release_a.wait(10)
        else:
            time.sleep(1.5)  # the batch carrying C: three times C's 0.5 s bound
        return [f"{i}:done" for i in items]

    commit = GroupCommit(send, wait_s=0.5)
    outcome: dict[str, str] = {}

    def caller(item: str) -> None:
        try:
            outcome[item] = commit.call(item, "put")
        except DataPlaneError as exc:
            outcome[item] = f"error: {exc}"

    threads = {name: threading.Thread(target=caller, args=(name,)) for name in "ABC"}
    threads["A"].start()
    assert a_sent.wait(10)
    threads["B"].start()
    time.sleep(0.05)
    threads["C"].start()
    time.sleep(0.05)
    release_a.set()
    for t in threads.values():
        t.join(timeout=30)
    assert outcome["A"] == "A:done" and outcome["B"] == "B:done"
    assert outcome["C"].startswith("error: the data-plane call put waited over"), outcome["C"]
    assert commit.call("later", "put") == "later:done"
