"""Network namespaces for tests: one private network stack per simulated machine.

Ray binds its gRPC servers to every interface (``0.0.0.0`` / ``::``) as soon as a node's
address is anything but ``127.0.0.1``, so several Ray nodes on loopback aliases (127.0.0.2,
127.0.0.3, ...) would all listen on the machine's own interface address too. In a network
namespace "every interface" means the namespace's own ``lo`` and one veth: a node there has
exactly two addresses, its loopback (private to it, as on a real machine) and the address the
test gave it, and the machine's interface address does not exist and cannot be routed to.

A command run in a node (:meth:`Namespace.exec_prefix`) also gets the node's own host name
(a UTS namespace) and an ``/etc/hosts`` naming every node (``ip netns exec`` mounts
``/etc/netns/<name>/hosts`` over it), so the host name resolves to the node's address as on
a cluster: what finds its address through the host name (gloo's default device, c10d) works.

:func:`bridged_namespaces` builds ``n`` node namespaces joined by a bridge that lives in a
namespace of its own (``…-sw``, the "switch"), so the machine's root namespace gets no
interface, address or route. Every name carries the creating process's pid: a namespace whose
creator has died (a test killed by a timeout) is removed, with its processes, by the next
:func:`remove_stale` (see there). Needs root (``CAP_SYS_ADMIN`` + ``CAP_NET_ADMIN``) and
iproute2's ``ip`` and util-linux; :func:`unavailable_reason` says why not where they are
missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

NETNS_DIR = Path("/run/netns")  # where `ip netns add` mounts a namespace under its name
ETC_DIR = Path("/etc/netns")  # files `ip netns exec` mounts over /etc, per namespace
NODE_IFACE = "clnet0"  # the veth inside each node namespace (not a name the host uses)
PREFIX = "rlctest"
_NAME = re.compile(rf"^{PREFIX}-(\d+)-([a-z0-9]+)-(sw|n\d+)$")
_CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (``None`` when they can)."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    missing = [tool for tool in ("ip", "unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: apt-get install iproute2 util-linux)"
    return None


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {out.stderr.strip()}")


def _setns(fd: int) -> None:
    """Move the calling *thread* into the network namespace open at ``fd``."""
    if sys.version_info >= (3, 12):
        os.setns(fd, os.CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@dataclass(frozen=True)
class Namespace:
    """A named network namespace (``/run/netns/<name>``); a node's has a host name."""

    name: str
    hostname: str = ""

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def exec_prefix(self) -> list[str]:
        """Argv prefix that runs a command on this node: in its network namespace, with its
        ``/etc/hosts`` and its host name. Every step execs the next, so the command keeps the
        pid ``Popen`` returns, and inherited file descriptors."""
        return ["ip", "netns", "exec", self.name, "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname]

    def run_in(self, fn: Callable[[], T], timeout_s: float = 30.0) -> T:
        """``fn()`` on a short-lived thread moved into this network namespace (its sockets
        are opened there); the caller's own threads stay where they are."""
        box: list[object] = []

        def target() -> None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    _setns(fd)
                finally:
                    os.close(fd)
                box.append(("ok", fn()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box.append(("err", exc))

        thread = threading.Thread(target=target, name=f"netns-{self.name}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        if not box:
            raise TimeoutError(f"{fn!r} in namespace {self.name} did not return in {timeout_s} s")
        kind, value = box[0]
        if kind == "err":
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    def pids(self) -> list[int]:
        """Processes whose (main thread's) network namespace is this one (``ip netns pids``)."""
        try:
            target = os.stat(self.path)
        except FileNotFoundError:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                info = os.stat(f"/proc/{entry}/ns/net")
                if (info.st_ino, info.st_dev) == (target.st_ino, target.st_dev):
                    found.append(int(entry))
        return sorted(found)

    def signal_all(self, sig: signal.Signals) -> None:
        for pid in self.pids():
            if pid != os.getpid():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def kill_all(self, timeout_s: float = 10.0) -> None:
        """SIGKILL every process inside, until none is left (or ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            self.signal_all(signal.SIGCONT)  # a stopped process dies of SIGKILL too, but be sure
            self.signal_all(signal.SIGKILL)
            time.sleep(0.1)

    def delete(self) -> None:
        if self.path.exists():
            _ip("netns", "delete", self.name)
        shutil.rmtree(ETC_DIR / self.name, ignore_errors=True)


def _disable_ipv6() -> None:
    """Runs inside a fresh namespace: no IPv6 link-local addresses, so a node's addresses are
    exactly its loopback and its IPv4 address."""
    for which in ("all", "default"):
        Path(f"/proc/sys/net/ipv6/conf/{which}/disable_ipv6").write_text("1")


def _make_node(ns: Namespace, switch: Namespace, index: int, address: str, hosts: str) -> None:
    _ip("netns", "add", ns.name)
    (ETC_DIR / ns.name).mkdir(parents=True)
    (ETC_DIR / ns.name / "hosts").write_text(hosts)
    ns.run_in(_disable_ipv6)
    _ip("-n", ns.name, "link", "set", "lo", "up")
    # Both ends are created directly in their namespaces: nothing appears in the root one.
    _ip("link", "add", NODE_IFACE, "netns", ns.name, "type", "veth",
        "peer", "name", f"n{index}", "netns", switch.name)
    _ip("-n", switch.name, "link", "set", f"n{index}", "master", "br0")
    _ip("-n", switch.name, "link", "set", f"n{index}", "up")
    _ip("-n", ns.name, "addr", "add", f"{address}/24", "dev", NODE_IFACE)
    _ip("-n", ns.name, "link", "set", NODE_IFACE, "up")


@contextlib.contextmanager
def bridged_namespaces(addresses: list[str]) -> Iterator[list[Namespace]]:
    """One namespace per address (all in one /24), bridged, node ``i`` named ``rlnode{i}``;
    every process left inside is killed and every namespace deleted on exit, also after a
    failure."""
    remove_stale()
    tag = os.urandom(3).hex()
    switch = Namespace(f"{PREFIX}-{os.getpid()}-{tag}-sw")
    nodes = [Namespace(f"{PREFIX}-{os.getpid()}-{tag}-n{i}", f"rlnode{i}")
             for i in range(len(addresses))]
    hosts = "127.0.0.1 localhost\n" + "".join(
        f"{address} {ns.hostname}\n" for ns, address in zip(nodes, addresses, strict=True))
    try:
        _ip("netns", "add", switch.name)
        _ip("-n", switch.name, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch.name, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(nodes, addresses, strict=True)):
            _make_node(ns, switch, i, address, hosts)
        yield nodes
    finally:
        for ns in [*nodes, switch]:
            ns.kill_all()
        for ns in [*nodes, switch]:
            with contextlib.suppress(RuntimeError):
                ns.delete()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Delete this module's namespaces whose creating process is gone (killed before its
    clean-up ran), killing what still runs in them. Only names of this module's shape are
    touched, and only when their creator's pid is dead."""
    names = {e.name for d in (NETNS_DIR, ETC_DIR) if d.is_dir() for e in d.iterdir()}
    for name in sorted(names):
        match = _NAME.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        stale = Namespace(name)
        stale.kill_all()
        with contextlib.suppress(RuntimeError):
            stale.delete()
