"""A multi-node Ray cluster on this one machine, for tests (docs/multinode.md says why so).

Each node is a ``ray start --block`` in a network namespace of its own (:mod:`tests.netns`),
with its own address (``10.254.0.1`` is the head, node ``i`` is ``10.254.0.{i+1}``), its own
``--temp-dir`` and Ray *logical* GPUs (``--num-gpus``: Ray schedules by them and sets
``CUDA_VISIBLE_DEVICES``; tensors stay on CPU). Nothing runs in, listens on or can reach the
machine's own interface address. The cluster has token auth with a token file of its own
(never ``~/.ray``), and fast node-failure detection (:data:`FAST_FAILURE_DETECTION`).

Every process runs on its node like on a machine of its own: its network namespace, its host
name (``rlnode{i}``) and an ``/etc/hosts`` naming every node. Drivers run on the head node:
:meth:`RayTestCluster.driver` (a Python driver process whose functions the test calls) or
:meth:`RayTestCluster.run` (any command, e.g. ``rlctl train``), both with
:meth:`RayTestCluster.driver_env`. The test process itself never joins: it is on no node.

    with ray_cluster([{"num_cpus": 2, "num_gpus": 2}] * 3) as cluster:
        with cluster.driver() as driver:
            driver.call(module_level_function, arg)     # runs in the driver, returns its result
        cluster.stop_node(2)                            # SIGSTOP a node: a hung machine

Every process of a node is found through its namespace, so :meth:`RayTestCluster.stop_node`,
:meth:`~RayTestCluster.kill_node` and the clean-up touch only processes this cluster started;
the clean-up runs whatever happened (and a crashed test's leftovers are removed next time).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import psutil
import pytest

from tests.netns import Namespace, bridged_namespaces, unavailable_reason
from tests.ray_driver import RayDriver

SUBNET = "10.254.0"
GCS_PORT = 6379  # every cluster has its own namespaces: the well-known port never clashes
DASHBOARD_PORT = 8265
OBJECT_STORE_BYTES = 100 * 1024**2  # per node; Ray's floor is 75 MiB

# A node that stops answering is declared dead after ~5 missed checks of 1 s (+2 s timeout
# each) instead of Ray's 3 s / 10 s x 5 (over a minute, measured): node-failure tests stay short.
FAST_FAILURE_DETECTION = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}
# Inherited settings that would pin a node or a driver to loopback or to another cluster.
_SCRUBBED = (
    "RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
)
_STARTED = "Ray runtime started."
START_ATTEMPTS = 2  # per worker node (see _check_alive)


@dataclass(frozen=True)
class NodeSpec:
    """What one node offers Ray: logical CPUs and GPUs, and custom resources."""

    num_cpus: int = 2
    num_gpus: int = 0
    resources: Mapping[str, float] = field(default_factory=dict)

    def start_args(self) -> list[str]:
        args = [f"--num-cpus={self.num_cpus}", f"--num-gpus={self.num_gpus}"]
        if self.resources:
            args.append(f"--resources={json.dumps(dict(self.resources))}")
        return args


@dataclass
class _Node:
    index: int
    address: str
    spec: NodeSpec
    namespace: Namespace
    temp_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    start: tuple[list[str], dict[str, str]] | None = None  # the command and env it runs
    attempts: int = 0

    @property
    def log(self) -> Path:
        return self.temp_dir / "ray-start.log"

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def started(self) -> bool:
        with contextlib.suppress(OSError):
            return _STARTED in self.log.read_text(errors="replace")
        return False


@dataclass
class RayTestCluster:
    """A running cluster: addresses, the env a driver needs, and node faults."""

    nodes: list[_Node]
    token_path: Path
    node_ids: list[str] = field(default_factory=list)  # Ray's node id of node i (hex)
    started_in_s: float = 0.0
    dashboard: bool = False

    @property
    def address(self) -> str:
        """The head's GCS address (``ray start --address=...``, ``RAY_ADDRESS``)."""
        return f"{self.nodes[0].address}:{GCS_PORT}"

    @property
    def dashboard_url(self) -> str:
        """The job server, reachable from the head node only (``ray job submit --address``)."""
        if not self.dashboard:
            raise RuntimeError("start the cluster with dashboard=True to submit jobs")
        return f"http://127.0.0.1:{DASHBOARD_PORT}"

    @property
    def node_addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    def namespace(self, node: int) -> Namespace:
        return self.nodes[node].namespace

    def driver_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """What a driver needs: the address, this cluster's token, multi-node allowed."""
        env = _scrubbed_env()
        env.update(RAY_ADDRESS=self.address, RAY_AUTH_MODE="token",
                   RAY_AUTH_TOKEN_PATH=str(self.token_path))
        env.update(extra or {})
        return env

    def driver_command(self, argv: Sequence[str], node: int = 0) -> list[str]:
        """``argv`` as run on ``node`` (the head by default): inside its namespace."""
        return [*self.namespace(node).exec_prefix(), *argv]

    def run(self, argv: Sequence[str], *, node: int = 0, timeout: float = 300.0,
            env: Mapping[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``node`` with :meth:`driver_env` (plus ``env``), bounded."""
        return subprocess.run(self.driver_command(argv, node), env=self.driver_env(env),
                              timeout=timeout, check=False, **kwargs)

    @contextlib.contextmanager
    def driver(self, timeout_s: float = 120.0) -> Iterator[RayDriver]:
        """A Python driver process on the head node, connected to this cluster."""
        driver = RayDriver(self.namespace(0).exec_prefix(), self.driver_env(), self.address,
                           expected_nodes=len(self.nodes), timeout_s=timeout_s)
        try:
            yield driver
        finally:
            driver.close()

    def pids(self, node: int) -> list[int]:
        """Every process of ``node`` (its raylet, agents, Ray workers, drivers run there)."""
        return self.namespace(node).pids()

    def stop_node(self, node: int) -> None:
        """SIGSTOP every process of ``node``: a hung or cut-off machine (undo: resume_node).
        Node 0's processes include the drivers run there."""
        self.namespace(node).signal_all(signal.SIGSTOP)

    def resume_node(self, node: int) -> None:
        self.namespace(node).signal_all(signal.SIGCONT)

    def kill_node(self, node: int) -> None:
        """SIGKILL every process of ``node``: a machine that crashed."""
        self.namespace(node).kill_all()

    def sockets(self, node: int) -> list[Socket]:
        """Every inet socket in ``node``'s namespace, with its owning pid. Read from inside
        (``/proc/net`` shows the reader's own namespace, so psutil runs there)."""
        out = self.run([sys.executable, "-c", _SOCKETS], node=node, timeout=60,
                       capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"listing node {node}'s sockets failed:\n{out.stderr[-2000:]}")
        return [Socket(*row) for row in json.loads(out.stdout)]


class Socket(NamedTuple):
    pid: int | None
    status: str  # psutil's: "LISTEN", "ESTABLISHED", ..., "NONE" for UDP
    local: str  # the local IP
    remote: str | None  # the peer IP, None when unconnected


_SOCKETS = """
import json, psutil
print(json.dumps([[c.pid, c.status, c.laddr.ip, c.raddr.ip if c.raddr else None]
                  for c in psutil.net_connections(kind="inet")]))
"""


def interface_addresses() -> set[str]:
    """The machine's own (non-loopback) addresses, as seen from the test process."""
    return {a.address.split("%")[0]
            for name, addrs in psutil.net_if_addrs().items() if name != "lo"
            for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)}


def _scrubbed_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1", RAY_USAGE_STATS_ENABLED="0")
    return env


def _write_token(path: Path) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))


def _start_command(node: _Node, head_address: str, object_store_bytes: int,
                   dashboard: bool) -> list[str]:
    args = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block",
            f"--node-ip-address={node.address}", *node.spec.start_args(),
            f"--object-store-memory={object_store_bytes}", f"--temp-dir={node.temp_dir}",
            "--disable-usage-stats", "--log-style=record", "--log-color=false"]
    if node.index == 0:
        args += ["--head", f"--port={GCS_PORT}", f"--include-dashboard={dashboard}",
                 f"--dashboard-port={DASHBOARD_PORT}"]
    else:
        args.append(f"--address={head_address}")
    # A node whose test process died gets SIGTERM (ray start then stops its processes).
    return ["setpriv", "--pdeathsig", "TERM", *node.namespace.exec_prefix(), *args]


def _spawn(node: _Node, cmd: list[str], env: dict[str, str]) -> None:
    node.start = (cmd, env)
    node.attempts += 1
    with open(node.log, "ab") as log:
        log.write(f"--- ray start, attempt {node.attempts}\n".encode())
        log.flush()
        node.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)


def _check_alive(node: _Node) -> None:
    """Raise if ``ray start`` of ``node`` exited; a worker node gets a second attempt: on an
    overloaded machine its raylet can miss ``ray start``'s fixed 30 s registration wait."""
    if node.proc is None or node.proc.poll() is None:
        return
    if node.index > 0 and node.attempts < START_ATTEMPTS and node.start is not None:
        node.namespace.kill_all()  # what the failed attempt left
        _spawn(node, *node.start)
        return
    raise RuntimeError(f"node {node.index} ({node.address}): `ray start` exited with "
                       f"{node.proc.returncode}:\n{node.log_tail()}")


def _gcs_answers(address: str) -> bool:
    with contextlib.suppress(OSError):
        socket.create_connection((address, GCS_PORT), timeout=1).close()
        return True
    return False


def _wait(what: str, ready: Any, nodes: list[_Node], deadline: float) -> None:
    while not ready():
        for node in nodes:
            _check_alive(node)
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- node {n.index} ({n.address}):\n{n.log_tail()}" for n in nodes)
            raise TimeoutError(f"the test cluster did not start in time: {what}\n{tails}")
        time.sleep(0.1)


# Asks the GCS (from the head's namespace) until every node is registered and alive; prints
# [[node id, address], ...] in node-address order. Ray's own client: nothing else speaks GCS.
_REGISTERED = r"""
import json, sys, time
from ray._raylet import GcsClient
address, want, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
client = GcsClient(address=address)
while True:
    infos = client.get_all_node_info(timeout=10).values()
    alive = sorted((i.node_manager_address, i.node_id.hex()) for i in infos if i.state == 0)
    if len(alive) >= want or time.monotonic() > deadline:
        print(json.dumps([[node_id, addr] for addr, node_id in alive]))
        break
    time.sleep(0.2)
"""


def _registered_node_ids(cluster: RayTestCluster, deadline: float) -> list[str]:
    bound = max(1.0, deadline - time.monotonic())
    out = cluster.run([sys.executable, "-c", _REGISTERED, cluster.address,
                       str(len(cluster.nodes)), str(bound)],
                      timeout=bound + 30, capture_output=True, text=True)
    found = json.loads(out.stdout) if out.returncode == 0 else []
    by_address = {addr: node_id for node_id, addr in found}
    if sorted(by_address) != sorted(cluster.node_addresses):
        raise TimeoutError(f"the test cluster's GCS knows nodes {sorted(by_address)}, not "
                           f"{cluster.node_addresses}:\n{out.stderr[-2000:]}")
    return [by_address[a] for a in cluster.node_addresses]


def _start(cluster: RayTestCluster, object_store_bytes: int, timeout_s: float) -> None:
    started = time.monotonic()
    deadline = started + timeout_s
    env = _scrubbed_env()
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(cluster.token_path),
               **FAST_FAILURE_DETECTION)
    head, workers = cluster.nodes[0], cluster.nodes[1:]
    _spawn(head, _start_command(head, cluster.address, object_store_bytes,
                                cluster.dashboard), env)
    # Workers join as soon as the GCS answers: the head's agents start meanwhile.
    _wait("the head's GCS to answer", lambda: head.namespace.run_in(
        lambda: _gcs_answers(head.address)), [head], deadline)
    for node in workers:
        _spawn(node, _start_command(node, cluster.address, object_store_bytes, False), env)
    _wait("every `ray start` to finish", lambda: all(n.started() for n in cluster.nodes),
          cluster.nodes, deadline)
    cluster.node_ids = _registered_node_ids(cluster, deadline)
    cluster.started_in_s = time.monotonic() - started


def _stop(nodes: list[_Node]) -> None:
    """Workers first, then the head: SIGCONT (a stopped node cannot stop), SIGTERM to each
    ``ray start --block`` (it stops its node's processes), then SIGKILL what is left."""
    for node in reversed(nodes):
        node.namespace.signal_all(signal.SIGCONT)
        if node.proc is not None and node.proc.poll() is None:
            node.proc.terminate()
    for node in reversed(nodes):
        if node.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=15)
        node.namespace.kill_all()
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait(timeout=10)


def _specs(nodes: Sequence[Mapping[str, Any] | NodeSpec]) -> list[NodeSpec]:
    specs = [n if isinstance(n, NodeSpec) else NodeSpec(**n) for n in nodes]
    if not 1 <= len(specs) <= 250:
        raise ValueError(f"a test cluster has 1 to 250 nodes, not {len(specs)}")
    return specs


def _remove_stale_dirs() -> None:
    """Temp dirs of clusters whose test process died before its clean-up (their nodes got
    SIGTERM through ``--pdeathsig``; :func:`tests.netns.remove_stale` takes the rest)."""
    for path in Path(tempfile.gettempdir()).glob("rlc-*-*"):
        match = re.fullmatch(r"rlc-(\d+)-\w+", path.name)
        if match and path.is_dir() and not psutil.pid_exists(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def ray_cluster(nodes: Sequence[Mapping[str, Any] | NodeSpec], *, dashboard: bool = False,
                object_store_bytes: int = OBJECT_STORE_BYTES,
                start_timeout_s: float = 180.0) -> Iterator[RayTestCluster]:
    """Start one node per entry of ``nodes`` (the first is the head); stop all of it after.

    ``dashboard`` starts the head's dashboard and job server (for ``ray job submit``). Skips
    the test where network namespaces cannot be made (not root, no iproute2).
    """
    specs = _specs(nodes)
    if (why := unavailable_reason()) is not None:
        pytest.skip(f"a multi-node test cluster needs network namespaces: {why}")
    _remove_stale_dirs()
    addresses = [f"{SUBNET}.{i + 1}" for i in range(len(specs))]
    # Short path: Ray's unix sockets live below it (at most 107 bytes).
    base = Path(tempfile.mkdtemp(prefix=f"rlc-{os.getpid()}-"))
    members: list[_Node] = []
    try:
        with bridged_namespaces(addresses) as namespaces:
            for i, (spec, addr, ns) in enumerate(zip(specs, addresses, namespaces, strict=True)):
                (base / f"n{i}").mkdir()
                members.append(_Node(i, addr, spec, ns, base / f"n{i}"))
            cluster = RayTestCluster(members, base / "auth_token", dashboard=dashboard)
            _write_token(cluster.token_path)
            try:
                _start(cluster, object_store_bytes, start_timeout_s)
                yield cluster
            finally:
                _stop(members)
    finally:
        shutil.rmtree(base, ignore_errors=True)
