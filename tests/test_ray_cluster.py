"""The test cluster of tests/ray_cluster.py: real Ray nodes, each in its own network namespace.

One cluster for the module (head + 2 workers, 2 logical GPUs each). The last two tests break
a node each (stop, then kill): they stay last in this file.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from tests.ray_cluster import RayTestCluster, interface_addresses, ray_cluster

pytestmark = pytest.mark.slow

NODES = [{"num_cpus": 2, "num_gpus": 2}] * 3
DEATH_BOUND_S = 90.0  # a wait bound, far above the ~5-15 s detection of FAST_FAILURE_DETECTION


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(NODES, dashboard=True) as running:
        print(f"test cluster of {len(NODES)} nodes started in {running.started_in_s:.1f} s")
        yield running


@pytest.fixture(scope="module")
def driver(cluster):
    with cluster.driver() as running:
        yield running


# ----------------------------------------------------------------- run inside the driver


def alive_nodes():
    import ray

    return {n["NodeID"]: (n["NodeManagerAddress"], n["Resources"]) for n in ray.nodes()
            if n["Alive"]}


def devices_on(node_id):
    """A num_gpus=1 task, then two num_gpus=1 actors at once, on one named node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def seen():
        return (ray.util.get_node_ip_address(), os.environ.get("CUDA_VISIBLE_DEVICES"),
                [str(i) for i in ray.get_gpu_ids()])

    @ray.remote(num_gpus=1, num_cpus=0)
    class Holder:
        def seen(self):
            return seen()

    on_node = NodeAffinitySchedulingStrategy(node_id, soft=False)
    task = ray.remote(num_gpus=1, num_cpus=0)(seen)
    # The task first: with both actors holding the node's 2 GPUs it could not be scheduled.
    from_task = ray.get(task.options(scheduling_strategy=on_node).remote(), timeout=240)
    actors = [Holder.options(scheduling_strategy=on_node).remote() for _ in range(2)]
    try:
        return from_task, ray.get([a.seen.remote() for a in actors], timeout=240)
    finally:
        for actor in actors:
            ray.kill(actor)


def spread_one_bundle_per_node(n_nodes):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_gpus=1, num_cpus=1)
    class Rank:
        def where(self):
            return ray.util.get_node_ip_address(), os.environ.get("CUDA_VISIBLE_DEVICES")

    group = placement_group([{"GPU": 1, "CPU": 1}] * n_nodes, strategy="STRICT_SPREAD")
    ray.get(group.ready(), timeout=240)
    ranks = [Rank.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=i)).remote() for i in range(n_nodes)]
    try:
        return ray.get([r.where.remote() for r in ranks], timeout=240)
    finally:
        for rank in ranks:
            ray.kill(rank)
        remove_placement_group(group)


def gloo_all_reduce_across(node_ids, master_address):
    """One gloo rank per node, rendezvous at ``master_address``; nothing set by hand: each rank
    finds its address the default way (its host name)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    def rank(index, world):
        import datetime
        import socket

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://{master_address}:29500",
                                rank=index, world_size=world,
                                timeout=datetime.timedelta(seconds=120))
        total = torch.tensor([float(index + 1)])
        dist.all_reduce(total)
        dist.destroy_process_group()
        host = socket.gethostname()
        return ray.util.get_node_ip_address(), host, socket.gethostbyname(host), total.item()

    return ray.get([rank.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id, soft=False)).remote(i, len(node_ids)) for i, node_id in enumerate(node_ids)],
        timeout=240)


_PINGERS = {}  # node id -> an actor there (module state of the driver process)


def start_pinger(node_id):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Pinger:
        def ping(self):
            return ray.util.get_node_ip_address()

    on_node = NodeAffinitySchedulingStrategy(node_id, soft=False)
    _PINGERS[node_id] = Pinger.options(scheduling_strategy=on_node).remote()
    return ray.get(_PINGERS[node_id].ping.remote(), timeout=240)


def wait_until_dead(node_id, bound_s):
    """Seconds until the GCS marks ``node_id`` dead, and what a call to its actor raises."""
    import ray

    started = time.monotonic()
    while any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
        if time.monotonic() - started > bound_s:
            raise TimeoutError(f"node {node_id} still alive after {bound_s} s")
        time.sleep(0.2)
    took = time.monotonic() - started
    pinger = _PINGERS.pop(node_id)
    try:
        ray.get(pinger.ping.remote(), timeout=bound_s)
    except ray.exceptions.RayActorError as exc:
        return took, type(exc).__name__
    return took, None


# ----------------------------------------------------------------------------------- tests


def test_every_node_has_its_address_and_its_logical_gpus(cluster: RayTestCluster, driver):
    nodes = driver.call(alive_nodes)
    assert sorted(nodes) == sorted(cluster.node_ids)
    for i, node_id in enumerate(cluster.node_ids):
        address, resources = nodes[node_id]
        assert address == cluster.node_addresses[i] == f"10.254.0.{i + 1}"
        assert resources["GPU"] == NODES[i]["num_gpus"]
        assert resources["CPU"] == NODES[i]["num_cpus"]
    assert cluster.address == "10.254.0.1:6379"


def test_a_gpu_task_on_a_named_node_gets_its_devices_from_ray(cluster, driver):
    task, actors = driver.call(devices_on, cluster.node_ids[1])
    address, visible, gpu_ids = task
    assert address == cluster.node_addresses[1]
    assert visible is not None and [visible] == gpu_ids  # Ray sets both, and they agree
    assert {a[0] for a in actors} == {cluster.node_addresses[1]}
    assert sorted(a[1] for a in actors) == ["0", "1"]  # two holders, two different devices
    assert all([a[1]] == a[2] for a in actors)


def test_strict_spread_places_one_bundle_on_each_node_address(cluster, driver):
    placed = driver.call(spread_one_bundle_per_node, len(cluster.nodes))
    assert sorted(address for address, _ in placed) == sorted(cluster.node_addresses)
    assert all(visible in ("0", "1") for _, visible in placed)


def _ip(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


def _namespace_addresses(cluster: RayTestCluster, node: int) -> set[str]:
    out = subprocess.run(["ip", "-n", cluster.namespace(node).name, "-j", "addr"],
                         capture_output=True, text=True, check=True, timeout=30)
    return {a["local"] for link in json.loads(out.stdout) for a in link.get("addr_info", [])}


def _connect_error(address: str) -> int:
    """The errno of a TCP connect to ``address`` (0 if it connected)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family) as s:
            s.settimeout(5)
            return s.connect_ex((address, 22))
    except OSError as exc:
        return exc.errno or -1


def test_no_socket_is_on_the_machines_interface_address(cluster, driver):
    own = interface_addresses()
    assert own, "this machine has no interface address to keep off"
    cluster_pids: set[int] = set()
    for i, address in enumerate(cluster.node_addresses):
        # A node has exactly its loopback and its address: "all interfaces" means these two.
        assert _namespace_addresses(cluster, i) == {"127.0.0.1", address}
        sockets = cluster.sockets(i)
        assert any(s.status == psutil.CONN_LISTEN for s in sockets), f"node {i}: is it up?"
        for sock in sockets:
            assert _ip(sock.local) not in own, sock
            assert sock.remote is None or _ip(sock.remote) not in own, sock
            if sock.status == psutil.CONN_LISTEN:
                assert _ip(sock.local) in {address, "127.0.0.1", "0.0.0.0", "::"}, sock
        cluster_pids |= set(cluster.pids(i))
        # ... and the interface address cannot even be routed to from the node.
        for target in (a for a in own if not ipaddress.ip_address(a).is_link_local):
            code = cluster.namespace(i).run_in(lambda t=target: _connect_error(t))
            assert code in (errno.ENETUNREACH, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL), target
    assert driver.pid in cluster_pids  # the driver runs on the head node too
    in_root = {c.pid for c in psutil.net_connections(kind="inet") if c.pid}
    assert cluster_pids.isdisjoint(in_root)  # no cluster process has a socket out here


def test_a_gloo_group_rendezvouses_across_node_addresses(cluster, driver):
    workers = cluster.node_ids[1:]
    results = driver.call(gloo_all_reduce_across, workers, cluster.node_addresses[1])
    expected = sum(range(1, len(workers) + 1))
    for i, (address, host, resolved, total) in enumerate(results, start=1):
        assert address == resolved == cluster.node_addresses[i]  # a host name of its own ...
        assert host == f"rlnode{i}"  # ... that resolves to the node's address
        assert total == expected


# Ray's first request to a GCS (what ray.init and `ray start --address` begin with).
GCS_HANDSHAKE = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).cluster_id
except Exception as exc:
    print(type(exc).__name__)
else:
    print("joined")
"""


def test_the_cluster_takes_only_its_own_token(cluster, tmp_path):
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)

    def outcome(env):
        out = cluster.run([sys.executable, "-c", GCS_HANDSHAKE, cluster.address], env=env,
                          capture_output=True, text=True, timeout=120)
        return out.stdout.strip().splitlines()[-1:]

    assert outcome({}) == ["joined"]
    assert outcome({"RAY_AUTH_MODE": "disabled"}) == ["AuthenticationError"]
    assert outcome({"RAY_AUTH_TOKEN_PATH": str(wrong)}) == ["AuthenticationError"]


def test_ray_job_submit_runs_the_entrypoint_as_a_driver_of_the_cluster(cluster, tmp_path):
    """docs/multinode.md's submission, as written: `-- bash -c "cd DIR && COMMAND"` (Ray
    quotes each word of the entrypoint, then runs it in a shell in the job server's directory)."""
    (tmp_path / "entry.py").write_text(
        "import os, ray\nray.init()\nprint('cwd', os.getcwd())\n"
        "print('nodes', sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))\n")
    out = cluster.run([sys.executable, "-m", "ray.scripts.scripts", "job", "submit",
                       "--address", cluster.dashboard_url, "--",
                       "bash", "-c", f"cd {tmp_path} && exec {sys.executable} entry.py"],
                      capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"cwd {tmp_path}" in out.stdout
    assert f"nodes {sorted(cluster.node_addresses)}" in out.stdout


# Node faults: these break nodes 2 then 1, so they stay last.


def test_a_stopped_worker_node_is_seen_dead_by_the_driver_within_the_bound(cluster, driver):
    node_id = cluster.node_ids[2]
    assert driver.call(start_pinger, node_id) == cluster.node_addresses[2]
    cluster.stop_node(2)  # every process of the node: raylet, agents, the actor
    took, error = driver.call(wait_until_dead, node_id, DEATH_BOUND_S, timeout_s=300)
    print(f"a stopped node was marked dead after {took:.1f} s")
    assert error is not None, "a call to an actor on the dead node still answered"
    assert sorted(driver.call(alive_nodes)) == sorted(cluster.node_ids[:2])
    # A machine that comes back after it was declared dead is not taken back: its raylet
    # learns it is dead and exits, and `ray start --block` takes the node's processes down.
    cluster.resume_node(2)
    deadline = time.monotonic() + DEATH_BOUND_S
    while cluster.pids(2) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.pids(2) == []


def test_a_killed_worker_node_is_seen_dead_and_leaves_no_process(cluster, driver):
    node_id = cluster.node_ids[1]
    assert driver.call(start_pinger, node_id) == cluster.node_addresses[1]
    cluster.kill_node(1)
    assert cluster.pids(1) == []
    took, error = driver.call(wait_until_dead, node_id, DEATH_BOUND_S, timeout_s=300)
    print(f"a killed node was marked dead after {took:.1f} s")
    assert error is not None
    assert sorted(driver.call(alive_nodes)) == [cluster.node_ids[0]]
