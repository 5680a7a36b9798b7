"""The placement plan: which devices of which node every worker of a run gets.

Computed from the recipe alone (``[resources]`` and each role's needs), so ``rlctl config
show`` prints it and ``config validate`` refuses a plan that cannot fit, before anything
starts; the session (:mod:`rlctl.run.placement`) turns it into Ray placement-group bundles.

A run has ``resources.nodes`` nodes of ``resources.devices_per_node`` devices; a device is an
accelerator (Ray's ``GPU`` resource) or, with ``accelerator = "cpu"``, a CPU core. The roles:

* **train**: ``engines.train.ranks`` ranks, one device each, filled node by node;
* **rollout**: ``engines.rollout.agent_workers`` workers, each with the devices its engine
  takes (``devices_per_worker``: 1 for an engine in the worker's process, ``replicas x
  tensor_parallel_size`` for server engines), all on one node (a tensor-parallel group never
  spans nodes);
* **reward**: ``engines.reward.workers`` reward-model workers, one device each (only when a
  reward is a model).

``colocate`` puts rollout and reward workers on the training devices (they take turns: each
actor asks Ray for its share of a device); ``split`` gives them devices of their own after
training's, on the nodes after it when ``resources.rollout_nodes`` says so.

With CPU devices a worker also gets the cores it computes on (:meth:`PlacementPlan.cores_of`):
its own devices in ``split``; in ``colocate`` the roles take turns, so each role's workers on
a node share out all the cores the plan uses there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rlctl.config.recipe import Recipe

Role = Literal["train", "rollout", "reward"]


class PlacementError(ValueError):
    """The roles' needs do not fit the resources the recipe gives; ``path`` is the key."""

    def __init__(self, path: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.path, self.fix = path, fix


@dataclass(frozen=True)
class Seat:
    """Where one worker runs: its node and devices (indices on that node)."""

    role: Role
    rank: int
    node: int
    devices: tuple[int, ...]
    share: float = 1.0
    """The part of each of its devices Ray accounts to it (colocated workers share)."""


@dataclass(frozen=True)
class PlacementPlan:
    """Every worker's seat (see the module docstring)."""

    accelerator: Literal["gpu", "cpu", "auto"]
    nodes: int
    devices_per_node: int
    placement: Literal["colocate", "split"]
    seats: tuple[Seat, ...] = field(default=())

    def of(self, role: Role) -> list[Seat]:
        return [s for s in self.seats if s.role == role]

    def used(self) -> list[list[int]]:
        """The devices the plan uses on each node, in order."""
        out: list[set[int]] = [set() for _ in range(self.nodes)]
        for seat in self.seats:
            out[seat.node].update(seat.devices)
        return [sorted(d) for d in out]

    def spans_nodes(self, role: Role) -> bool:
        return len({s.node for s in self.of(role)}) > 1

    def cores_of(self, seat: Seat) -> tuple[int, ...]:
        """The node's cores (device indices) ``seat`` computes on, with CPU devices (see the
        module docstring)."""
        if self.placement == "split":
            return seat.devices
        peers = [s for s in self.of(seat.role) if s.node == seat.node]
        used = self.used()[seat.node]
        i, n = peers.index(seat), len(peers)
        share = used[i * len(used) // n:(i + 1) * len(used) // n]
        return tuple(share) or seat.devices  # more workers than cores: their own device

    def resource(self) -> str:
        """The Ray resource a device is: ``GPU`` or ``CPU`` (``auto``: decided at start)."""
        return {"gpu": "GPU", "cpu": "CPU"}.get(self.accelerator, "GPU or CPU")

    def request(self) -> list[str]:
        """What the run asks the cluster for, per node (``rlctl config show``)."""
        return [f"node {i}: {len(devices)} {self.resource()} (devices {_span(devices)})"
                for i, devices in enumerate(self.used()) if devices]

    def as_json(self) -> dict[str, object]:
        """The plan as data (``rlctl config show --format json``)."""
        return {"placement": self.placement, "accelerator": self.accelerator,
                "resource": self.resource(),
                "nodes": [{"node": i, "devices": d} for i, d in enumerate(self.used()) if d],
                "seats": [{"role": s.role, "rank": s.rank, "node": s.node,
                           "devices": list(s.devices), "share": s.share} for s in self.seats]}

    def rows(self) -> list[str]:
        """One line per worker: role, rank, node, devices and share."""
        return [f"{s.role} {s.rank}: node {s.node}, devices {_span(list(s.devices))}"
                + (f" (share {s.share:g})" if s.share < 1 else "") for s in self.seats]


@dataclass(frozen=True)
class Placed:
    """What a worker learns of its seat on the cluster (a worker-constructor argument; the
    session builds it from the reserved placement, :mod:`rlctl.run.placement`)."""

    role: str
    rank: int
    node: int
    """The plan's node index."""
    node_address: str
    """The address of the Ray node the worker runs on."""
    devices: tuple[str, ...]
    """The accelerator ids Ray gave the seat (``CUDA_VISIBLE_DEVICES`` entries); empty with
    CPU devices."""
    cores: tuple[int, ...]
    """With CPU devices: the CPU cores (ids on the node) the worker computes on; else empty."""
    rendezvous_host: str
    """Where the role's process group meets (rank 0's rendezvous store listens there):
    loopback when all its ranks share a node, else the address of rank 0's node."""


def _span(devices: list[int]) -> str:
    if devices and devices == list(range(devices[0], devices[-1] + 1)) and len(devices) > 2:
        return f"{devices[0]}-{devices[-1]}"
    return ",".join(map(str, devices))


def build_placement(recipe: Recipe, *, rollout_devices: int, reward_workers: int
                    ) -> PlacementPlan:
    """The plan of ``recipe``; ``rollout_devices``: the devices one rollout worker's engine
    takes (its options' ``devices_per_worker``); ``reward_workers``: 0 without a model reward.
    Raises :class:`PlacementError` when the roles do not fit."""
    res, engines = recipe.resources, recipe.engines
    accelerator = res.accelerator
    if accelerator == "auto" and recipe.run.device != "auto":
        accelerator = "gpu" if recipe.run.device == "cuda" else "cpu"
    devices = res.nodes * res.devices_per_node
    if engines.train.ranks > devices:
        raise PlacementError(
            "engines.train.ranks",
            f"{engines.train.ranks} training ranks but the cluster has {devices} devices "
            f"(resources.nodes {res.nodes} x devices_per_node {res.devices_per_node})",
            f"set resources.devices_per_node >= {-(-engines.train.ranks // res.nodes)} or "
            "lower engines.train.ranks")
    grid = _Grid(res.nodes, res.devices_per_node)
    train = [grid.take("train", r, 1) for r in range(engines.train.ranks)]
    if res.placement == "colocate":
        grid = _Grid(res.nodes, res.devices_per_node)  # the same devices, from the start
    elif res.rollout_nodes is not None:
        grid.skip_to(res.nodes - res.rollout_nodes)
    rollout = [grid.take("rollout", w, rollout_devices)
               for w in range(engines.rollout.agent_workers)]
    if res.placement == "colocate":
        grid = _Grid(res.nodes, res.devices_per_node)  # reward models share them too
    reward = [grid.take("reward", w, 1) for w in range(reward_workers)]
    seats = _shares([*train, *rollout, *reward])
    return PlacementPlan(accelerator, res.nodes, res.devices_per_node, res.placement,
                         tuple(seats))


def _shares(seats: list[Seat]) -> list[Seat]:
    """Each seat's share: 1 over the most workers on any of its devices."""
    users: dict[tuple[int, int], int] = {}
    for seat in seats:
        for d in seat.devices:
            users[(seat.node, d)] = users.get((seat.node, d), 0) + 1
    return [Seat(s.role, s.rank, s.node, s.devices,
                 1.0 / max((users[(s.node, d)] for d in s.devices), default=1))
            for s in seats]


class _Grid:
    """The free devices, node by node; :meth:`take` hands out a worker's devices."""

    def __init__(self, nodes: int, per_node: int) -> None:
        self.nodes, self.per_node = nodes, per_node
        self.node, self.next = 0, 0

    def skip_to(self, node: int) -> None:
        if node > self.node:
            self.node, self.next = node, 0

    def take(self, role: Role, rank: int, count: int) -> Seat:
        if count == 0:  # attached servers: the worker itself needs no device
            return Seat(role, rank, min(self.node, self.nodes - 1), ())
        if count > self.per_node:
            raise PlacementError(
                "resources.devices_per_node",
                f"one {role} worker needs {count} devices on one node (a tensor-parallel "
                f"group never spans nodes), but a node has {self.per_node}",
                f"set resources.devices_per_node >= {count}, or fewer replicas / a smaller "
                "tensor_parallel_size per rollout worker (and more engines.rollout.agent_workers)")
        if self.next + count > self.per_node:
            self.node, self.next = self.node + 1, 0
        if self.node >= self.nodes:
            raise PlacementError(
                "resources.nodes",
                f"{role} {rank} does not fit: {self.nodes} node(s) x {self.per_node} devices "
                "are all taken by the workers before it",
                "add nodes or devices (resources.nodes, resources.devices_per_node), use "
                'resources.placement = "colocate", or run fewer ranks / workers')
        seat = Seat(role, rank, self.node, tuple(range(self.next, self.next + count)))
        self.next += count
        return seat


def placement_of(recipe: Recipe, registry: object, rollout_options: object | None
                 ) -> PlacementPlan:
    """:func:`build_placement` with the needs read from the recipe, its validated rollout
    options and the registry (which rewards are models)."""
    from rlctl.config.strict import RolloutEngineOptions

    rollout = recipe.engines.rollout
    replicas = max(rollout.replicas // rollout.agent_workers, 1)  # each worker's share
    devices = (rollout_options.devices_per_worker(replicas)
               if isinstance(rollout_options, RolloutEngineOptions) else 1)
    return build_placement(recipe, rollout_devices=devices,
                           reward_workers=_reward_workers(recipe, registry))


def _reward_workers(recipe: Recipe, registry: object) -> int:
    """``engines.reward.workers`` when a ``[[rewards]]`` entry is a model reward, else 0."""
    for reward in recipe.rewards:
        found = registry.find("reward_function", reward.name)  # type: ignore[attr-defined]
        if found is not None and found.metadata.get("kind", "function") == "model":
            return recipe.engines.reward.workers
    return 0


def replica_problems(recipe: Recipe, rollout_options: object | None) -> list[object]:
    """``engines.rollout.replicas`` against the engine: the replicas an engine starts are
    shared out evenly to the agent workers; an engine without replicas of its own (in the
    worker's process, or attached to ``urls``) takes none, so a count there would do nothing."""
    from rlctl.config.problems import ConfigProblem
    from rlctl.config.strict import RolloutEngineOptions

    rollout = recipe.engines.rollout
    if not isinstance(rollout_options, RolloutEngineOptions):
        return []  # the options' own problem is reported already
    if not rollout_options.starts_replicas:
        if rollout.replicas == 1:
            return []
        return [ConfigProblem(
            "engines.rollout.replicas", f"the {rollout.backend} engine (as configured) starts no "
            f"replicas of its own, so replicas = {rollout.replicas} would do nothing",
            "remove engines.rollout.replicas (scale with engines.rollout.agent_workers)")]
    if rollout.replicas % rollout.agent_workers:
        return [ConfigProblem(
            "engines.rollout.replicas",
            f"{rollout.replicas} replicas cannot be shared by {rollout.agent_workers} agent "
            "workers (each runs replicas / agent_workers of them)",
            f"use a multiple of engines.rollout.agent_workers ({rollout.agent_workers})")]
    return []


def placement_problems(recipe: Recipe, registry: object,
                       validated: dict[str, object]) -> list[object]:
    """The replicas' split, then the plan of a Ray-mode recipe, as a problem when it does not
    fit (``--local`` runs every role in one process: nothing to place)."""
    from rlctl.config.problems import ConfigProblem

    options = validated.get("engines.rollout.options")
    problems = replica_problems(recipe, options)
    if problems or recipe.resources.mode == "local":
        return problems
    try:
        placement_of(recipe, registry, options)
    except PlacementError as exc:
        return [ConfigProblem(exc.path, str(exc), exc.fix)]
    return []


def placement_comments(recipe: Recipe, plan: PlacementPlan | None) -> str:
    """The plan as TOML comments (``rlctl config show``): what the run asks the cluster for
    and every worker's seat."""
    if plan is None:
        return "# placement: resources.mode = \"local\": every role in this process\n"
    device = {"GPU": "a GPU", "CPU": "a CPU core"}.get(
        plan.resource(), "a GPU when the cluster has GPUs, else a CPU core")
    head = f"# placement ({plan.placement}; a device is {device}):"
    lines = [f"#   asks the cluster for {line}" for line in plan.request()]
    lines += [f"#   {row}" for row in plan.rows()]
    return head + "\n" + "\n".join(lines) + "\n"
