"""What a worker group may call on its workers: :class:`Worker`, with documented defaults.

A worker group (:mod:`rlctl.trainer.controller.worker_group`) runs one instance of a worker
class per rank, as a Ray actor or as an object in the controller's process (``--local``), and
starts every group the same way: a Ray group's ranks first check they have the controller's
plugins (:meth:`Worker.check_plugins`), rank 0 of a group whose ranks form one torch.distributed
world binds its rendezvous port (:meth:`Worker.rendezvous_port`), every rank builds
itself in :meth:`Worker.ready` (taking that port), then each reports its :meth:`Worker.pid`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from rlctl.plugin_parity import PluginPin, check_plugins_here


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
