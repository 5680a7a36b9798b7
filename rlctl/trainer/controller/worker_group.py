"""Worker groups: one role's ranks, as Ray actors or as objects in the controller's process.

Both kinds share one interface so the controller's step is the same code in ``ray`` and
``local`` mode. Every argument sent to a worker and every result received is measured
(pickled size) in a :class:`TrafficMeter`: this is how the trainer proves it moves only
metadata (``perf/controller_bytes_per_sample``). The definition is the same in both modes:
a by-reference payload (a Ray ``ObjectRef``, or the ``LocalRef`` that ``--local`` uses in
its place, see :mod:`rlctl.protocol.refs`) counts as a fixed-size reference, everything else
as its pickled bytes.

A call names the worker method by its function, ``group.call(TrainingWorker.compute_log_prob,
...)``, so a reader (and an IDE) can follow a phase into the worker; Ray calls it by name.
Workers implement :class:`rlctl.trainer.worker.contract.Worker`, and every group starts the
same way whatever it runs on (:meth:`WorkerGroup.start`): rank 0's rendezvous port first
when the ranks form one torch.distributed world, then ``ready`` on every rank, then ``pid``.

Every call has a bound (the group's ``timeout``, ``schedule.phase_timeout_s``, unless the
caller gives one). When it passes, each rank that has not answered is asked for its pid on
another thread of the actor: a rank that does not answer that either is reported as stopped
(SIGSTOP, a wedged interpreter), the others as alive but still busy, so the error names the
rank at fault and the phase it stopped in.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlctl.plugin_parity import PluginPin
from rlctl.protocol.refs import is_reference
from rlctl.trainer.controller.heartbeat import DEFAULT_BOUND_S, Heartbeat
from rlctl.trainer.worker.contract import Worker

R = TypeVar("R")


def method_name(method: Callable[..., Any]) -> str:
    """The name a worker method is called by (``TrainingWorker.ready`` -> ``"ready"``)."""
    return method.__name__

DEFAULT_TIMEOUT_S = 600.0
"""Bound of a call when neither the caller nor the group gives one (the recipe's default)."""
LIVENESS_TIMEOUT_S = 5.0
"""How long a rank that missed its bound has to answer the liveness check."""
WAIT_SLICE_S = 1.0
"""Waits are sliced so a failed rank surfaces at once and Ctrl-C is honoured."""


class WorkerError(RuntimeError):
    """A worker call failed, died or timed out; the message names the group and rank."""


@dataclass
class TrafficMeter:
    """Bytes the controller sent to and received from workers (pickled sizes)."""

    sent: int = 0
    received: int = 0
    calls: int = 0
    by_method: dict[str, int] = field(default_factory=dict)

    def count(self, method: str, payload: Any, *, outgoing: bool) -> None:
        stream = io.BytesIO()
        _RefAsToken(stream, protocol=pickle.HIGHEST_PROTOCOL).dump(payload)
        size = stream.tell()
        if outgoing:
            self.sent += size
            self.calls += 1
        else:
            self.received += size
        self.by_method[method] = self.by_method.get(method, 0) + size

    def reset(self) -> None:
        self.sent = self.received = self.calls = 0
        self.by_method.clear()

    @property
    def total(self) -> int:
        return self.sent + self.received


class _RefAsToken(pickle.Pickler):
    """Pickles references as one short token: their bytes do not pass through the controller."""

    # reducer_override, not persistent_id: pickle skips it for str, int, float, list, dict...
    # (what metadata is made of), where persistent_id ran once per object, ~30k times a step.
    def reducer_override(self, obj: Any) -> Any:
        return (str, ("ref",)) if is_reference(obj) else NotImplemented


@dataclass
class Pending:
    """Results of an asynchronous group call, collected with :meth:`WorkerGroup.wait`."""

    method: str
    handles: list[Any]


class WorkerGroup(ABC):
    """The ranks of one role."""

    def __init__(
        self, name: str, worker_cls: type[Worker], world_size: int, meter: TrafficMeter, *,
        timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.name = name
        self.worker_cls = worker_cls
        """The class every rank runs: :meth:`start` calls its start protocol."""
        self.world_size = world_size
        self.meter = meter
        self.timeout = timeout
        """Seconds any call may take unless its caller gives another bound."""
        self.pids: list[int | None] = [None] * world_size
        """Process id of every rank, once known (error messages name it)."""
        self.nodes: list[str | None] = [None] * world_size
        """The node address of every rank placed on a cluster (error messages name it)."""

    def who(self, rank: int) -> str:
        """``train rank 1 (pid 4242 on node 10.0.0.7)``: how errors name a rank."""
        pid = self.pids[rank] if rank < len(self.pids) else None
        node = self.nodes[rank] if rank < len(self.nodes) else None
        where = [f"pid {pid}"] if pid is not None else []
        where += [f"on node {node}"] if node is not None else []
        return f"{self.name} rank {rank}" + (f" ({' '.join(where)})" if where else "")

    def bound(self, timeout: float | None) -> float:
        """The bound of one call: the caller's, else the group's (never unbounded)."""
        return self.timeout if timeout is None else timeout

    def start(self, timeout: float, plugins: Sequence[PluginPin] = ()) -> None:
        """The start of every group: every rank checks it has ``plugins`` (the controller's,
        when the ranks run in other processes), rank 0's rendezvous port when the ranks form one
        torch.distributed world (bound and held by rank 0 before the others learn it: a port
        probed here would be free only now), ``ready`` on every rank (constructor and build
        failures surface now, with the rank), then every rank's pid."""
        worker_cls = self.worker_cls
        if plugins:
            self.call(worker_cls.check_plugins, timeout=timeout, expected=list(plugins))
        joined: dict[str, Any] = {}
        if self.world_size > 1 and worker_cls.joins_process_group:
            joined["master_port"] = self.call_rank(0, worker_cls.rendezvous_port,
                                                   timeout=timeout)
        self.call(worker_cls.ready, timeout=timeout, **joined)
        self.pids = list(self.call(worker_cls.pid, timeout=timeout))

    @abstractmethod
    def submit(
        self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]],
        timeout: float | None = None,
    ) -> Pending:
        """Start ``method(**per_rank[r])`` on every rank r without waiting.

        ``timeout`` bounds calls that run at submit time (local workers); remote calls are
        bounded by :meth:`wait`.
        """

    @abstractmethod
    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        """Results of a submitted call, one per rank; raises :class:`WorkerError`.

        ``timeout``: seconds to wait; ``None`` = the group's bound (:attr:`timeout`).
        """

    def unresponsive(self, ranks: Sequence[int] | None = None) -> list[int]:
        """Ranks (of ``ranks``, default all) that do not answer a liveness check in time."""
        return []

    @abstractmethod
    def forward(self, pending: Pending, rank: int) -> Any:
        """Rank ``rank``'s result of ``pending`` as an argument of another group's call,
        without waiting for it here: the callee receives the value once it is ready."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop the workers."""

    def raise_if_failed(self, pending: Pending) -> None:
        """Raise :class:`WorkerError` now if any rank of ``pending`` already failed or died,
        or stopped answering the heartbeat (:mod:`rlctl.trainer.controller.heartbeat`)."""
        return  # the default (ranks in this process): nothing to do

    def call(
        self,
        method: Callable[..., R],
        per_rank: Sequence[dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        meanwhile: Callable[[], None] | None = None,
        **shared: Any,
    ) -> list[R]:
        """Run ``method`` on every rank and wait; ``per_rank`` entries extend ``shared``.

        ``meanwhile``: controller work run after the calls are dispatched, before the wait
        (while remote ranks compute; local ones have finished by then)."""
        kwargs = [dict(shared, **(per_rank[r] if per_rank else {})) for r in range(self.world_size)]
        pending = self.submit(method, kwargs, timeout)
        if meanwhile is not None:
            meanwhile()
        return self.wait(pending, timeout)

    def call_rank(
        self, rank: int, method: Callable[..., R], *, timeout: float | None = None, **kwargs: Any
    ) -> R:
        """Run ``method`` on one rank only (e.g. export weights from rank 0)."""
        pending = self._submit_one(rank, method_name(method), kwargs, timeout)
        return self.wait(pending, timeout)[0]

    @abstractmethod
    def _submit_one(
        self, rank: int, method: str, kwargs: dict[str, Any], timeout: float | None = None
    ) -> Pending: ...


class LocalWorkerGroup(WorkerGroup):
    """Workers as plain objects in the controller's process (``--local``): breakpoints work.

    Calls run synchronously at submit time, so the bound applies there (``submit``'s
    ``timeout``, else the group's; see :mod:`rlctl.trainer.controller.local_bound`);
    arguments are still measured as if they were sent, so controller-traffic numbers mean the
    same in both modes.
    """

    def __init__(
        self,
        name: str,
        workers: list[Worker],
        meter: TrafficMeter,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        super().__init__(name, type(workers[0]), len(workers), meter, timeout=timeout)
        self.workers = workers
        self.pids = [os.getpid()] * len(workers)

    def submit(
        self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]],
        timeout: float | None = None,
    ) -> Pending:
        method = method_name(method)
        results = []
        for rank, kwargs in enumerate(per_rank):
            results.append(self._run(rank, method, kwargs, self.bound(timeout)))
        return Pending(method, results)

    def _submit_one(
        self, rank: int, method: str, kwargs: dict[str, Any], timeout: float | None = None
    ) -> Pending:
        return Pending(method, [self._run(rank, method, kwargs, self.bound(timeout))])

    def _run(self, rank: int, method: str, kwargs: dict[str, Any], timeout: float) -> Any:
        from rlctl.trainer.controller.local_bound import PhaseTimeout, bounded

        self.meter.count(method, kwargs, outgoing=True)
        try:
            what = f"{self.name} rank {rank}: {method}"
            result = bounded(getattr(self.workers[rank], method), timeout, what, **kwargs)
        except PhaseTimeout as exc:
            raise WorkerError(
                f"{self.name} rank {rank} (this process) stopped answering during {method}: {exc}"
            ) from None
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # torch's CheckpointException is a BaseException
            raise WorkerError(f"{self.name} rank {rank}: {method} failed: {exc}") from exc
        return result

    def forward(self, pending: Pending, rank: int) -> Any:
        return pending.handles[rank]  # local calls ran at submit: this is the value

    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        for result in pending.handles:
            self.meter.count(pending.method, result, outgoing=False)
        return list(pending.handles)

    def shutdown(self) -> None:
        for worker in self.workers:
            worker.close()


class RayWorkerGroup(WorkerGroup):
    """Workers as Ray actors, one per rank.

    Actors run up to four calls at once on threads, so the liveness check (``pid``) is
    answered while a phase runs.
    """

    def __init__(
        self,
        name: str,
        worker_cls: type[Worker],
        init_kwargs: Sequence[dict[str, Any]],
        meter: TrafficMeter,
        *,
        actor_options: Sequence[dict[str, Any]] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S, liveness_timeout: float = DEFAULT_BOUND_S,
    ) -> None:
        """``actor_options``: per rank, where Ray puts it (a placement-group bundle and the
        resources it takes there; :mod:`rlctl.run.placement`); none: anywhere, no resources."""
        import ray

        super().__init__(name, worker_cls, len(init_kwargs), meter, timeout=timeout)
        # Some methods run on threads of their own (the worker's concurrency groups), e.g. a
        # weight update that must not queue behind generate calls. (Ray takes the groups only
        # here, not in options.)
        groups = dict(worker_cls.concurrency_groups)
        self.method_groups: dict[str, str] = dict(worker_cls.method_groups)
        remote_cls = (ray.remote(concurrency_groups=groups)(worker_cls) if groups
                      else ray.remote(worker_cls))
        placed = actor_options or [{"num_cpus": 0}] * len(init_kwargs)
        self.actors = [
            remote_cls.options(name=None, max_concurrency=4, **options).remote(**kwargs)
            for kwargs, options in zip(init_kwargs, placed, strict=True)
        ]
        self.nodes = [kw["placed"].node_address if kw.get("placed") is not None else None
                      for kw in init_kwargs]
        self.stopped: set[int] = set()  # ranks that failed a liveness check: not waited for again
        self.heartbeat = Heartbeat(lambda r: self._method(r, "pid").remote(), liveness_timeout)

    def submit(
        self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]],
        timeout: float | None = None,
    ) -> Pending:
        method = method_name(method)
        refs = []
        for rank, kwargs in enumerate(per_rank):
            self.meter.count(method, kwargs, outgoing=True)
            refs.append((rank, self._method(rank, method).remote(**kwargs)))
        return Pending(method, refs)

    def _submit_one(
        self, rank: int, method: str, kwargs: dict[str, Any], timeout: float | None = None
    ) -> Pending:
        self.meter.count(method, kwargs, outgoing=True)
        return Pending(method, [(rank, self._method(rank, method).remote(**kwargs))])

    def _method(self, rank: int, method: str) -> Any:
        """The actor method, in its concurrency group when the worker class names one."""
        bound = getattr(self.actors[rank], method)
        group = self.method_groups.get(method)
        return bound if group is None else bound.options(concurrency_group=group)

    def forward(self, pending: Pending, rank: int) -> Any:
        # The call's ObjectRef as a top-level argument: Ray hands the callee its value once
        # the call returns (a failed call fails the callee's call too, naming it).
        return dict(pending.handles)[rank]

    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        import ray

        bound = self.bound(timeout)
        deadline = time.monotonic() + bound
        rank_of = {ref: rank for rank, ref in pending.handles}
        results: dict[int, Any] = {}
        waiting = list(rank_of)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(pending.method, bound, sorted(rank_of[r] for r in waiting))
            slice_s = min(left, WAIT_SLICE_S)
            ready, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=slice_s)
            for ref in ready:
                self.heartbeat.seen(rank_of[ref])
                results[rank_of[ref]] = self._result(pending.method, rank_of[ref], ref)
            self._check_heartbeat(pending.method, sorted(rank_of[r] for r in waiting))
        ordered = [results[rank] for rank, _ in pending.handles]
        for result in ordered:
            self.meter.count(pending.method, result, outgoing=False)
        return ordered

    def _result(self, method: str, rank: int, ref: Any) -> Any:
        """The value of a finished call, or the :class:`WorkerError` that says why there is none."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return ray.get(ref, timeout=0)
        except RayActorError as exc:
            raise WorkerError(f"{self.who(rank)} died during {method}: {exc}") from exc
        except RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            raise WorkerError(f"{self.who(rank)}: {method} failed: {cause}") from exc

    def _timed_out(self, method: str, bound: float, late: list[int]) -> WorkerError:
        """The error for ranks ``late`` that missed the bound: which stopped, which are busy."""
        stopped = self.unresponsive(late)
        busy = [r for r in late if r not in stopped]
        if stopped:
            who = ", ".join(self.who(r) for r in stopped)
            text = (f"{who} stopped answering during {method}: no result within {bound:.0f} s "
                    f"and no answer to a liveness check within {LIVENESS_TIMEOUT_S:.0f} s "
                    "(the process is stopped or wedged)")
            if busy:
                others = ", ".join(self.who(r) for r in busy)
                text += f"; {others} still in {method}, waiting for it"
        else:
            text = (f"{', '.join(self.who(r) for r in busy)}: {method} did not finish within "
                    f"{bound:.0f} s (the process still answers: the phase is stuck or slow; "
                    "raise schedule.phase_timeout_s if it is only slow)")
        return WorkerError(text)

    def unresponsive(self, ranks: Sequence[int] | None = None) -> list[int]:
        import ray
        from ray.exceptions import RayError

        ranks = list(range(self.world_size)) if ranks is None else list(ranks)
        checks = {self._method(r, "pid").remote(): r for r in ranks}
        deadline = time.monotonic() + LIVENESS_TIMEOUT_S
        waiting = list(checks)
        answered: set[int] = set()
        while waiting and time.monotonic() < deadline:
            left = deadline - time.monotonic()
            slice_s = min(left, WAIT_SLICE_S)
            ready, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=slice_s)
            for ref in ready:
                with contextlib.suppress(RayError):  # a dead rank does not answer either
                    ray.get(ref, timeout=0)
                    answered.add(checks[ref])
        silent = [r for r in ranks if r not in answered]
        self.stopped.update(silent)
        return silent

    def _check_heartbeat(self, method: str, ranks: list[int]) -> None:
        """Raise naming the ranks of ``ranks`` that stopped answering the heartbeat."""
        stopped = self.heartbeat.beat(ranks)
        if stopped:
            self.stopped.update(stopped)
            raise WorkerError(f"{', '.join(self.who(r) for r in stopped)} stopped answering "
                              f"during {method}: {self.heartbeat.describe()}")

    def raise_if_failed(self, pending: Pending) -> None:
        import ray

        refs = [ref for _, ref in pending.handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        ready_ids = {r.hex() for r in ready}
        # ray.get of a finished call is immediate; it raises for a failed or dead rank.
        # Results are not metered here: wait() meters them when the caller collects them.
        for rank, ref in pending.handles:
            if ref.hex() in ready_ids:
                self.heartbeat.seen(rank)
                self._result(pending.method, rank, ref)
        self._check_heartbeat(pending.method,
                              [rank for rank, ref in pending.handles if ref.hex() not in ready_ids])

    def shutdown(self, grace_s: float = 10.0) -> None:
        """Close every rank (all at once, one bound for all), then kill the actors.

        A stopped or wedged rank never answers ``close``: one that failed a liveness check is
        not asked, any other costs the grace period once, not per rank, and ``ray.kill`` ends
        them all anyway.
        """
        import ray

        # Closing is best effort; the kill below always happens.
        closing = []
        for rank, actor in enumerate(self.actors):
            if rank in self.stopped:
                continue
            with contextlib.suppress(Exception):
                closing.append(actor.close.remote())
        with contextlib.suppress(Exception):
            ray.wait(closing, num_returns=len(closing), timeout=grace_s)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)


def new_worker_group(
    name: str,
    worker_cls: type[Worker],
    init_kwargs: Sequence[dict[str, Any]],
    meter: TrafficMeter,
    *,
    in_process: bool,
    timeout: float, liveness_timeout: float = DEFAULT_BOUND_S,
    actor_options: Sequence[dict[str, Any]] | None = None,
) -> WorkerGroup:
    """One role's ranks, created but not started: ``worker_cls(**init_kwargs[r])`` per rank
    r, as objects in this process (``in_process``: ``--local``) or as Ray actors (placed by
    ``actor_options``), whose processes start and import their modules from now on, beside
    the other roles'. :meth:`WorkerGroup.start` then checks plugins and builds the engines
    (``ready``); a worker's constructor only keeps its arguments."""
    if in_process:
        return LocalWorkerGroup(name, [worker_cls(**kw) for kw in init_kwargs], meter,
                                timeout=timeout)
    return RayWorkerGroup(name, worker_cls, init_kwargs, meter, timeout=timeout,
                          liveness_timeout=liveness_timeout, actor_options=actor_options)
