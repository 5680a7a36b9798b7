"""Placement on a real multi-node Ray cluster (rlctl/run/placement.py), end to end.

A head node without GPUs (where the controller runs, as on many clusters) and two worker nodes
with two Ray *logical* GPUs each, every node in its own network namespace
(:mod:`tests.ray_cluster`); tensors stay on CPU (``run.device = "cpu"``) while Ray places by
GPU bundles. ``rlctl train`` runs on the head as the cluster's driver; what every worker
process saw (its node, Ray's GPU ids, ``CUDA_VISIBLE_DEVICES``, its rendezvous) is read back
from the run's ``placement.json``. The last test stops a node: it stays last.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ray_cluster import RayTestCluster, ray_cluster
from tests.trainer.cli_runs import SMALL_STEPS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "tiny_grpo.toml"
NODES = [{"num_cpus": 2, "num_gpus": 0}, {"num_cpus": 2, "num_gpus": 2},
         {"num_cpus": 2, "num_gpus": 2}]
ON_GPUS = ["resources.accelerator=gpu", "run.device=cpu", "resources.nodes=2"]
RUN_BOUND_S = 420.0


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(NODES, dashboard=True) as running:
        print(f"test cluster of {len(NODES)} nodes started in {running.started_in_s:.1f} s")
        yield running


def train_command(out: Path, overrides: list[str]) -> list[str]:
    """Small steps: what is checked is where the workers ran, not what they learned."""
    sets = [a for o in [f"run.output_dir={out}", *SMALL_STEPS, *overrides] for a in ("-s", o)]
    return [sys.executable, "-m", "rlctl", "train", str(RECIPE), "-q", *sets]


def train(cluster: RayTestCluster, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``rlctl train`` on the head node, as the cluster's driver (``RAY_ADDRESS`` set)."""
    return cluster.run(train_command(out, ["schedule.total_steps=2", *overrides]),
                       timeout=RUN_BOUND_S, capture_output=True, text=True, cwd=ROOT)


def placement(out: Path) -> dict[tuple[str, int], dict]:
    rows = json.loads((out / "tiny-grpo" / "placement.json").read_text())
    return {(r["role"], r["rank"]): r for r in rows}


def test_split_puts_training_and_rollout_on_nodes_of_their_own(cluster, tmp_path) -> None:
    _head, first, second = cluster.node_addresses
    # transferqueue's ZMQ sockets bind each node's own address: the samples cross nodes
    done = train(cluster, tmp_path, *ON_GPUS, "resources.address=auto",
                 "resources.placement=split", "resources.rollout_nodes=1",
                 "data_plane.backend=transferqueue")
    assert done.returncode == 0, done.stderr[-3000:]
    seats = placement(tmp_path)
    assert sorted(seats) == [("rollout", 0), ("train", 0), ("train", 1)]
    train_nodes = {seats["train", r]["reported"]["node_address"] for r in (0, 1)}
    rollout_node = seats["rollout", 0]["reported"]["node_address"]
    assert train_nodes == {first} and rollout_node == second  # never the GPU-less head
    for seat in seats.values():
        seen = seat["reported"]
        # the devices the plan names are the ones Ray gave the process, and what it sees
        assert seat["node_address"] == seen["node_address"] and seat["share"] == 1.0
        assert seen["ray_gpu_ids"] == seat["devices"]
        assert seen["cuda_visible_devices"] == ",".join(seat["devices"])
    assert {seats["train", 0]["devices"][0], seats["train", 1]["devices"][0]} == {"0", "1"}
    # both ranks on one node: their store and gloo stay on loopback
    assert {seats["train", r]["reported"]["rendezvous"].split(":")[0] for r in (0, 1)} == {
        "127.0.0.1"}


def test_training_ranks_on_two_nodes_meet_at_rank_0s_node(cluster, tmp_path) -> None:
    _head, first, second = cluster.node_addresses
    done = train(cluster, tmp_path, *ON_GPUS, "resources.devices_per_node=1")
    assert done.returncode == 0, done.stderr[-3000:]
    seats = placement(tmp_path)
    rank0, rank1 = seats["train", 0], seats["train", 1]
    assert {rank0["reported"]["node_address"], rank1["reported"]["node_address"]} == {
        first, second}
    meet = rank0["reported"]["node_address"]
    # the gloo group's rendezvous crossed nodes: both ranks met at rank 0's node address
    assert rank0["reported"]["rendezvous"] == rank1["reported"]["rendezvous"]
    assert rank0["reported"]["rendezvous"].split(":")[0] == meet == rank0["rendezvous_host"]
    # colocated: the rollout worker shares rank 0's GPU
    rollout = seats["rollout", 0]
    assert rollout["reported"]["node_address"] == meet and rollout["share"] == 0.5
    assert rollout["reported"]["ray_gpu_ids"] == rank0["reported"]["ray_gpu_ids"]


def test_a_plan_the_cluster_cannot_hold_fails_naming_needs_and_nodes(cluster, tmp_path) -> None:
    started = time.monotonic()
    # three nodes of one GPU each (training on two, rollout on its own): two have GPUs
    done = train(cluster, tmp_path, "resources.accelerator=gpu", "run.device=cpu",
                 "resources.nodes=3", "resources.devices_per_node=1",
                 "resources.placement=split", "resources.rollout_nodes=1",
                 "schedule.start_timeout_s=60")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = [ln for ln in done.stderr.splitlines() if "placement plan" in ln]
    assert "needs node 0: 1 GPU; node 1: 1 GPU; node 2: 1 GPU" in line
    for address in cluster.node_addresses:  # what every node has
        assert address in line
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "tiny-grpo" / "metrics.jsonl").exists()
    print(f"\nunsatisfiable plan refused in {took:.1f} s")


def test_ray_job_submit_runs_rlctl_train_as_the_clusters_driver(cluster, tmp_path) -> None:
    """docs/multinode.md's submission: the controller is the job's driver (RAY_ADDRESS set by
    the job server), its workers on the GPU nodes."""
    command = " ".join(train_command(tmp_path, [*ON_GPUS, "schedule.total_steps=1"]))
    out = cluster.run([sys.executable, "-m", "ray.scripts.scripts", "job", "submit",
                       "--address", cluster.dashboard_url, "--",
                       "bash", "-c", f"cd {ROOT} && exec {command}"],
                      capture_output=True, text=True, timeout=RUN_BOUND_S)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "succeeded" in out.stdout, out.stdout[-3000:]
    seats = placement(tmp_path)
    nodes = {seat["reported"]["node_address"] for seat in seats.values()}
    assert nodes and nodes <= set(cluster.node_addresses[1:])  # never the GPU-less head
    assert (tmp_path / "tiny-grpo" / "metrics.jsonl").read_text().count("\n") == 1


def test_a_node_that_stops_mid_run_fails_the_run_naming_it(cluster, tmp_path) -> None:
    *_, second = cluster.node_addresses
    argv = train_command(tmp_path, [*ON_GPUS, "resources.placement=split",
                                    "resources.rollout_nodes=1", "schedule.total_steps=200",
                                    "schedule.liveness_timeout_s=10"])
    run = subprocess.Popen(cluster.driver_command(argv), env=cluster.driver_env(), cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = tmp_path / "tiny-grpo" / "metrics.jsonl"
        deadline = time.monotonic() + RUN_BOUND_S
        while not (metrics.exists() and metrics.read_text().strip()):
            assert run.poll() is None, run.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run logged no step"
            time.sleep(0.5)
        cluster.stop_node(2)  # the rollout node hangs, raylet and all
        stopped = time.monotonic()
        _, err = run.communicate(timeout=180)
        took = time.monotonic() - stopped
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    print(f"\nstopped node named {took:.1f} s later")
    assert run.returncode == 1, err[-3000:]
    assert "rollout rank 0 (pid" in err and f"on node {second})" in err, err[-3000:]
