"""Worker groups: one role's ranks, as Ray actors or as objects in the controller's process.

Both kinds share one interface so the controller's step is the same code in ``ray`` and
``local`` mode. Every argument sent to a worker and every result received is measured
(pickled size) in a :class:`TrafficMeter`: this is how the trainer proves it moves only
metadata (``perf/controller_bytes_per_sample``).

A call names the worker method by its function, ``group.call(TrainingWorker.compute_log_prob,
...)``, so a reader (and an IDE) can follow a phase into the worker; Ray calls it by name.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R")


def method_name(method: Callable[..., Any] | str) -> str:
    """The name a worker method is called by (``TrainingWorker.compute_log_prob`` ->
    ``"compute_log_prob"``)."""
    return method if isinstance(method, str) else method.__name__


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
        size = len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
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


@dataclass
class Pending:
    """Results of an asynchronous group call, collected with :meth:`WorkerGroup.wait`."""

    method: str
    handles: list[Any]


class WorkerGroup(ABC):
    """The ranks of one role."""

    def __init__(self, name: str, world_size: int, meter: TrafficMeter) -> None:
        self.name = name
        self.world_size = world_size
        self.meter = meter

    @abstractmethod
    def submit(self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]]) -> Pending:
        """Start ``method(**per_rank[r])`` on every rank r without waiting."""

    @abstractmethod
    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        """Results of a submitted call, one per rank; raises :class:`WorkerError`."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop the workers."""

    def raise_if_failed(self, pending: Pending) -> None:
        """Raise :class:`WorkerError` now if any rank of ``pending`` already failed or died."""

    def call(
        self,
        method: Callable[..., R],
        per_rank: Sequence[dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        **shared: Any,
    ) -> list[R]:
        """Run ``method`` on every rank and wait; ``per_rank`` entries extend ``shared``."""
        kwargs = [dict(shared, **(per_rank[r] if per_rank else {})) for r in range(self.world_size)]
        return self.wait(self.submit(method, kwargs), timeout)

    def call_rank(
        self, rank: int, method: Callable[..., R], *, timeout: float | None = None, **kwargs: Any
    ) -> R:
        """Run ``method`` on one rank only (e.g. export weights from rank 0)."""
        pending = self._submit_one(rank, method_name(method), kwargs)
        return self.wait(pending, timeout)[0]

    @abstractmethod
    def _submit_one(self, rank: int, method: str, kwargs: dict[str, Any]) -> Pending: ...


class LocalWorkerGroup(WorkerGroup):
    """Workers as plain objects in the controller's process (``--local``): breakpoints work.

    Calls run synchronously at submit time; arguments are still measured as if they were
    sent, so controller-traffic numbers mean the same in both modes.
    """

    def __init__(self, name: str, workers: list[Any], meter: TrafficMeter) -> None:
        super().__init__(name, len(workers), meter)
        self.workers = workers

    def submit(self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]]) -> Pending:
        method = method_name(method)
        results = []
        for rank, kwargs in enumerate(per_rank):
            results.append(self._run(rank, method, kwargs))
        return Pending(method, results)

    def _submit_one(self, rank: int, method: str, kwargs: dict[str, Any]) -> Pending:
        return Pending(method, [self._run(rank, method, kwargs)])

    def _run(self, rank: int, method: str, kwargs: dict[str, Any]) -> Any:
        self.meter.count(method, kwargs, outgoing=True)
        try:
            result = getattr(self.workers[rank], method)(**kwargs)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # torch's CheckpointException is a BaseException
            raise WorkerError(f"{self.name} rank {rank}: {method} failed: {exc}") from exc
        return result

    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        for result in pending.handles:
            self.meter.count(pending.method, result, outgoing=False)
        return list(pending.handles)

    def shutdown(self) -> None:
        for worker in self.workers:
            close = getattr(worker, "close", None)
            if close is not None:
                close()


class RayWorkerGroup(WorkerGroup):
    """Workers as Ray actors, one per rank."""

    def __init__(
        self,
        name: str,
        worker_cls: type,
        init_kwargs: Sequence[dict[str, Any]],
        meter: TrafficMeter,
        *,
        num_cpus: float = 0,
        start_timeout: float = 300.0,
    ) -> None:
        import ray

        super().__init__(name, len(init_kwargs), meter)
        remote_cls = ray.remote(worker_cls)
        self.actors = [
            remote_cls.options(num_cpus=num_cpus, name=None, max_concurrency=4).remote(**kwargs)
            for kwargs in init_kwargs
        ]
        # Surface constructor failures (import errors, bad options) now, with the rank.
        self.call(worker_cls.ready, timeout=start_timeout)

    def submit(self, method: Callable[..., Any], per_rank: Sequence[dict[str, Any]]) -> Pending:
        method = method_name(method)
        refs = []
        for rank, kwargs in enumerate(per_rank):
            self.meter.count(method, kwargs, outgoing=True)
            refs.append((rank, getattr(self.actors[rank], method).remote(**kwargs)))
        return Pending(method, refs)

    def _submit_one(self, rank: int, method: str, kwargs: dict[str, Any]) -> Pending:
        self.meter.count(method, kwargs, outgoing=True)
        return Pending(method, [(rank, getattr(self.actors[rank], method).remote(**kwargs))])

    def wait(self, pending: Pending, timeout: float | None = None) -> list[Any]:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        results = []
        for rank, ref in pending.handles:
            try:
                result = ray.get(ref, timeout=timeout)
            except GetTimeoutError as exc:
                raise WorkerError(
                    f"{self.name} rank {rank}: {pending.method} did not finish within {timeout:.0f} s"
                ) from exc
            except RayActorError as exc:
                raise WorkerError(f"{self.name} rank {rank} died during {pending.method}: {exc}") from exc
            except RayTaskError as exc:
                cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                raise WorkerError(f"{self.name} rank {rank}: {pending.method} failed: {cause}") from exc
            self.meter.count(pending.method, result, outgoing=False)
            results.append(result)
        return results

    def raise_if_failed(self, pending: Pending) -> None:
        import ray

        refs = [ref for _, ref in pending.handles]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        ready_ids = {r.hex() for r in ready}
        finished = Pending(pending.method, [(rank, ref) for rank, ref in pending.handles if ref.hex() in ready_ids])
        if finished.handles:
            # ray.get of a finished call is immediate; it raises for a failed or dead rank.
            # Results are not metered here: wait() meters them when the caller collects them.
            for rank, ref in finished.handles:
                try:
                    ray.get(ref, timeout=0)
                except Exception:
                    self.wait(Pending(pending.method, [(rank, ref)]), timeout=0)

    def shutdown(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # closing is best effort; the kill below always happens
                pass
            ray.kill(actor)
