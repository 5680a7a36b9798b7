"""What a worker group may call on its workers: :class:`Worker`, with documented defaults.

A worker group (:mod:`rlctl.trainer.controller.worker_group`) runs one instance of a worker
class per rank, as a Ray actor or as an object in the controller's process (``--local``), and
starts every group the same way: a Ray group's ranks first check they have the controller's
plugins (:meth:`Worker.check_plugins`), rank 0 of a group whose ranks form one torch.distributed
world binds its rendezvous port (:meth:`Worker.rendezvous_port`), every rank builds
itself in :meth:`Worker.ready` (taking that port), then each reports its :meth:`Worker.pid`.

In Ray mode every worker is told its seat of the placement plan (:attr:`Worker.placed`) and
takes it first thing in :meth:`Worker.ready` (:meth:`Worker.take_seat`): the devices Ray gave
it, the cores it computes on, where its process group meets. :meth:`Worker.whereabouts`
reports what the process actually sees (written to the run's ``placement.json``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from rlctl.config.placement import Placed
from rlctl.plugin_parity import PluginPin, check_plugins_here

LOOPBACK = "127.0.0.1"


class Worker(ABC):
    """Base of the trainer's worker classes (training, rollout, reward workers)."""

    concurrency_groups: ClassVar[dict[str, int]] = {"liveness": 1}
    """Ray concurrency groups: name -> threads. Methods named in :attr:`method_groups` run on
    their group's threads (a weight update must not queue behind generate calls; the liveness
    check must not queue behind anything); every other method shares the actor's default
    threads. A subclass that adds a group keeps ``liveness``."""
    method_groups: ClassVar[dict[str, str]] = {"pid": "liveness"}
    """Method name -> its concurrency group."""
    joins_process_group: ClassVar[bool] = False
    """The group's ranks form one torch.distributed world: rank 0 answers
    :meth:`rendezvous_port` and every rank's :meth:`ready` takes it as ``master_port``."""

    placed: Placed | None = None
    """This worker's seat on the cluster (Ray mode; set by the constructor from the session's
    placement); ``None`` in ``--local``, where every role shares the controller's process."""

    def take_seat(self) -> None:
        """See exactly the seat's resources (first thing in :meth:`ready`): its accelerators
        as ``CUDA_VISIBLE_DEVICES`` (Ray's ids; a server the worker starts inherits them, and
        ``cuda:0`` is the seat's first), and with CPU devices its cores as the process's CPU
        affinity and torch's thread count. Nothing without a seat."""
        placed = self.placed
        if placed is None:
            return
        if placed.devices:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(placed.devices)
        if placed.cores:
            import torch

            # The plan numbers a node's cores 0..n-1; this process maps them onto the CPUs
            # it may run on (a container may allow fewer than the machine has).
            allowed = sorted(os.sched_getaffinity(0))
            cores = {allowed[i % len(allowed)] for i in placed.cores}
            # Affinity is per thread on Linux: every thread the process has now (Ray's
            # executor threads among them); the threads they start inherit it.
            for tid in os.listdir("/proc/self/task"):
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    os.sched_setaffinity(int(tid), cores)
            torch.set_num_threads(len(cores))

    @property
    def rendezvous_host(self) -> str:
        """Where this worker's process group meets: its seat's (a node address when the role
        spans nodes), else loopback."""
        return self.placed.rendezvous_host if self.placed is not None else LOOPBACK

    def whereabouts(self) -> dict[str, Any]:
        """Where this process runs and what it sees: host, pid, Ray's node address and GPU
        ids, ``CUDA_VISIBLE_DEVICES``, its CPUs, its process group's rendezvous."""
        out: dict[str, Any] = {
            "host": socket.gethostname(), "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cpus": sorted(os.sched_getaffinity(0)),
            "rendezvous": (f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
                           if "MASTER_ADDR" in os.environ and self.joins_process_group
                           else None)}
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            out.update(node_address=ray.util.get_node_ip_address(),
                       ray_gpu_ids=[str(i) for i in ray.get_gpu_ids()])
        return out

    def check_plugins(self, expected: Sequence[PluginPin]) -> None:
        """Raise naming this node, the plugin and both versions when this process lacks a
        plugin the controller loaded (``expected``), or has another version; called before
        :meth:`ready` on the ranks of a Ray group (:mod:`rlctl.plugin_parity`)."""
        check_plugins_here(expected)

    @abstractmethod
    def ready(self, master_port: int | None = None) -> bool:
        """Build what the worker runs (engines, models); raise to fail the start, naming why.
        ``master_port``: rank 0's :meth:`rendezvous_port` (only when
        :attr:`joins_process_group` and the group has several ranks)."""

    def rendezvous_port(self) -> int:
        """Rank 0 of a multi-rank world: a port it has bound and holds for its rendezvous
        store (only called when :attr:`joins_process_group`)."""
        raise TypeError(f"{type(self).__name__} does not join a process group")

    def pid(self) -> int:
        """This worker's process id; also the liveness check the controller sends a late rank
        (answered on another thread while a phase runs)."""
        return os.getpid()

    def close(self) -> None:
        """Release what :meth:`ready` built (called once, when the group shuts down)."""
        return  # the default: nothing to do
