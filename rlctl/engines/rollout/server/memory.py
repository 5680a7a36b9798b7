"""Colocated memory for server engines: release weights and KV cache while training runs.

A server engine that can (``vllm``: sleep mode; ``sglang``: the memory saver) declares its
:class:`MemoryRoutes`: one request that frees everything, and one per part that takes it
back. The weights are kept in CPU memory (vLLM sleep level 1, SGLang's weights CPU backup), so
a weight sync that moves only LoRA adapters, or that fails half-way, still finds the base
weights; the KV cache is discarded. :class:`ServerMemory` (the server engines' capability)
sends them to every replica and remembers what is released, so taking back a part that is
resident sends nothing.

The order matters (the failure users report: a sync into sleeping weights is silently
overwritten when the engine wakes up and restores its CPU copy): the weights come back before
the weight sync writes into them, the KV cache after it (the trainer's memory is still
resident while the sync runs), both before any generation
(:class:`~rlctl.trainer.worker.rollout_worker.RolloutWorker` does both). Each request is
bounded; a failure names the server, the endpoint and what was being done.

Only servers this engine starts on CUDA release: the flags are refused on CPU by vLLM ("Sleep
mode is not supported on current platform") and SGLang's release crashes its CPU server
(docs/sglang.md), and attached servers (``urls``) were started by someone else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rlctl.engines.rollout.contract import (
    MEMORY_PARTS,
    MemoryPart,
    MemoryRelease,
    RolloutEngineSpec,
)
from rlctl.engines.rollout.server.process import ServerError

if TYPE_CHECKING:
    from rlctl.engines.rollout.server.engine import ServerRolloutEngine


@dataclass(frozen=True)
class Route:
    """One POST to every replica: ``path`` (with its query) and JSON ``body``."""

    path: str
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class MemoryRoutes:
    """How a server engine releases its memory and takes it back (see the module docstring)."""

    feature: str
    """What the engine calls it, in messages (``vLLM sleep mode``)."""
    release: Route
    """Frees the weights (to CPU memory) and the KV cache."""
    resume: Mapping[MemoryPart, Route]
    """Takes one part back."""


def memory_release_of(spec: RolloutEngineSpec, options: Any,
                      routes: MemoryRoutes | None, engine: str) -> MemoryRelease:
    """Whether an engine with these routes, spec and options releases, and why."""
    if routes is None:
        return MemoryRelease(False, f"the {engine} engine cannot release its memory")
    if not spec.release_memory:
        return MemoryRelease(False, "the step plan keeps the rollout's memory resident "
                                    "(rlctl config show says why)")
    if options.urls:
        return MemoryRelease(False, "attached servers (engines.rollout.options.urls) were not "
                                    f"started by rlctl with {routes.feature}")
    if not spec.device.startswith("cuda"):
        return MemoryRelease(False, f"the rollout device is {spec.device!r} and "
                                    f"{routes.feature} runs on CUDA only")
    return MemoryRelease(True, f"{routes.feature}: weights to CPU memory, KV cache freed "
                               "while training runs")


class ServerMemory:
    """The colocated-memory capability of
    :class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine` (mixed in before
    :class:`~rlctl.engines.rollout.contract.RolloutEngine`, whose defaults it overrides): a
    subclass names its :attr:`memory_routes`; the servers start able to release when
    :attr:`releases_memory` (the subclass's ``server_command`` adds its flags)."""

    memory_routes: ClassVar[MemoryRoutes | None] = None
    """How its servers release memory and take it back (``None``: they cannot)."""
    engine_name: ClassVar[str]
    spec: RolloutEngineSpec
    options: Any
    _released: frozenset[MemoryPart] = frozenset()  # the parts released now

    def memory_release(self) -> MemoryRelease:
        return memory_release_of(self.spec, self.options, self.memory_routes, self.engine_name)

    @property
    def releases_memory(self) -> bool:
        """Whether its servers start able to release memory (:meth:`memory_release`)."""
        return self.memory_release().releases

    @property
    def released_memory(self) -> frozenset[MemoryPart]:
        """The parts released now (empty: everything resident)."""
        return self._released

    def release_memory(self, *, timeout_s: float) -> None:
        """Free every replica's weights and KV cache (a released engine stays so)."""
        routes = self.memory_routes
        if routes is None or self._released or not self.releases_memory:
            return
        self._send(routes.release, timeout_s, "releasing memory")
        self._released = frozenset(routes.resume)

    def resume_memory(self, parts: Sequence[MemoryPart] = MEMORY_PARTS, *,
                      timeout_s: float) -> None:
        """Take back ``parts``, in order (those resident are skipped)."""
        routes = self.memory_routes
        for part in parts:
            if routes is not None and part in self._released:
                self._send(routes.resume[part], timeout_s, f"taking back the {part}")
                self._released = self._released - {part}

    def _send(self, route: Route, timeout_s: float, doing: str) -> None:
        """POST ``route`` to every replica at once, each bounded by ``timeout_s``."""
        engine = cast("ServerRolloutEngine", self)
        feature = self.memory_routes.feature if self.memory_routes is not None else ""

        async def one(replica: Any) -> Any:
            return await engine.post(replica, route.path, route.body, timeout_s=timeout_s,
                                     limit=False)

        try:
            engine.on_replicas(one)
        except ServerError as exc:
            raise ServerError(f"{doing} ({feature}, POST {route.path}, bound {timeout_s:g} s) "
                              f"failed: {exc}") from exc
