"""Clears of finished keys run off the critical path, and are still waited for and heard."""

from __future__ import annotations

import threading

import pytest
import torch
from tensordict import TensorDict

from rlctl.dataplane.memory import MemoryDataPlane
from rlctl.trainer.controller.background_clears import BackgroundClears, ClearError


def _plane_with(keys: list[str]) -> MemoryDataPlane:
    plane = MemoryDataPlane()
    plane.kv_batch_put(keys, "train", TensorDict({"x": torch.ones(len(keys))}, [len(keys)]),
                       [{"status": "success"} for _ in keys])
    return plane


def test_a_clear_is_done_when_the_step_after_next_begins():
    plane = _plane_with(["a_0_0", "b_0_0"])
    clears = BackgroundClears(plane, timeout_s=10)
    clears.next_step()  # step 1
    clears.clear(["a_0_0"], "train")
    clears.next_step()  # step 2: step 1's clear may still run
    clears.clear(["b_0_0"], "train")
    clears.next_step()  # step 3: step 1's clear is done
    assert "a_0_0" not in plane.kv_list("train")
    clears.close()  # everything handed in is done
    assert plane.kv_list("train") == {}


class _StuckPlane(MemoryDataPlane):
    """A store whose clear never returns until released (a stopped server)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def kv_clear(self, keys, partition_id):
        self.release.wait(30)


def test_a_stuck_clear_fails_loudly_within_its_bound():
    plane = _StuckPlane()
    clears = BackgroundClears(plane, timeout_s=0.2)
    clears.clear(["a_0_0"], "train")
    with pytest.raises(ClearError, match=r"clearing 1 key\(s\) of partition 'train' did not "
                                         r"finish within 0.2 s"):
        clears.close()
    plane.release.set()


def test_a_failed_clear_is_raised_with_what_it_cleared():
    plane = MemoryDataPlane()
    plane.close()  # every call now fails
    clears = BackgroundClears(plane, timeout_s=10)
    clears.clear(["a_0_0", "b_0_0"], "train")
    clears.next_step()
    with pytest.raises(ClearError, match=r"clearing 2 key\(s\) of partition 'train' failed: "):
        clears.next_step()
