"""The all-reduce helpers on a real 2-rank gloo group: sums, maxima, sub-groups, and the device.

The helpers take the communication device explicitly (no default): a CPU tensor that gloo
reduces fails on NCCL with two or more GPUs, so every call site must say where it reduces.
A device the group's backend cannot reduce on is refused with an error naming the fix.
"""

from __future__ import annotations

import inspect
import json
import os

import pytest
import torch
import torch.multiprocessing as mp

from rlctl.engines.distributed import all_reduce_max_int, all_reduce_sum, group_device
from rlctl.ports import free_port


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    import torch.distributed as dist

    from rlctl.engines.distributed import ensure_process_group

    ensure_process_group(rank, world, "cpu")
    singles = [dist.new_group([r]) for r in range(world)]  # every rank builds every group
    result: dict = {
        "device": str(group_device()),
        "sum": all_reduce_sum(rank + 1.5, group_device()),
        "sum_of_tensor": all_reduce_sum(torch.tensor([[rank + 2]]), "cpu"),
        "max": all_reduce_max_int(3 * rank, torch.device("cpu")),
        "own_group_sum": all_reduce_sum(5.0, "cpu", group=singles[rank]),
        "own_group_device": str(group_device(singles[rank])),
    }
    try:
        all_reduce_sum(1.0, "meta")
    except ValueError as exc:
        result["refused"] = str(exc)
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("collectives")
    mp.spawn(_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_sums_and_maxima_cover_both_ranks(two_ranks):
    for r in two_ranks:
        assert r["sum"] == 1.5 + 2.5
        assert r["sum_of_tensor"] == 2 + 3  # a [1, 1] tensor is reduced as a scalar
        assert r["max"] == 3


def test_a_group_argument_reduces_over_that_group_only(two_ranks):
    assert [r["own_group_sum"] for r in two_ranks] == [5.0, 5.0]


def test_gloo_groups_reduce_on_cpu(two_ranks):
    assert {r["device"] for r in two_ranks} == {"cpu"}
    assert {r["own_group_device"] for r in two_ranks} == {"cpu"}


def test_a_device_the_backend_cannot_reduce_on_is_refused_naming_the_fix(two_ranks):
    for r in two_ranks:
        assert "a meta tensor cannot be reduced by this process group (cpu:gloo" in r["refused"]
        assert "cuda for nccl, cpu for gloo" in r["refused"]


@pytest.mark.parametrize("helper", [all_reduce_sum, all_reduce_max_int])
def test_the_device_has_no_default(helper):
    # Without a default, a call site that forgets the device fails at once, on CPU too.
    assert inspect.signature(helper).parameters["device"].default is inspect.Parameter.empty
    with pytest.raises(TypeError):
        helper(1)  # type: ignore[call-arg]


def test_without_a_process_group_the_value_comes_back_on_the_given_device():
    assert all_reduce_sum(torch.tensor(2.5), "cpu") == 2.5
    assert all_reduce_max_int(7, "cpu") == 7
    assert group_device() == torch.device("cpu")


WORLD_OF_ONE = """
import os, socket, sys
held = socket.socket(); held.bind(("127.0.0.1", 0)); held.listen()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(held.getsockname()[1]))
import torch.distributed as dist
from rlctl.engines.distributed import ensure_process_group
ensure_process_group(0, 1, "cpu")
assert dist.get_world_size() == 1
assert os.environ["MASTER_PORT"] == str(held.getsockname()[1])  # not rewritten for children
print("ONE-OK")
"""


def test_a_world_of_one_ignores_a_master_port_it_inherited():
    """A parent's MASTER_PORT (whose store the parent may still hold) is not a world of one's."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", WORLD_OF_ONE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert "ONE-OK" in proc.stdout, proc.stderr[-2000:]
