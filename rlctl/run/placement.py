"""The placement plan on a Ray cluster: one placement group, devices from Ray.

:func:`reserve` picks the plan's nodes among the cluster's live nodes, reserves one bundle per
device of the plan (``{"GPU": 1}`` or ``{"CPU": 1}``, pinned to its node by Ray's
``node:<address>`` resource, so a tensor-parallel group stays on one node), waits for it
within ``schedule.start_timeout_s`` and then asks each bundle which device Ray gave it (a
probe task scheduled in the bundle reads ``ray.get_gpu_ids()``). A plan the cluster cannot
satisfy fails at once, or when the wait runs out, naming what it needs and what every node
has. Workers are then scheduled into their seat's first bundle with their share of it, and
learn their devices and their node's address from :class:`Placed`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rlctl.config.placement import Placed, PlacementPlan, Seat

# The share of a bundle the probe takes: small enough to fit next to every worker.
PROBE_SHARE = 0.001


class PlacementUnsatisfiable(RuntimeError):
    """The cluster cannot hold the plan; the message names needs and what each node has."""


@dataclass
class ClusterPlacement:
    """The reserved placement group and where each plan device landed."""

    plan: PlacementPlan
    resource: str
    pg: Any
    bundles: dict[tuple[int, int], int]
    """(plan node, device) -> bundle index."""
    addresses: list[str]
    """Plan node -> node address."""
    device_ids: dict[tuple[int, int], str]
    """(plan node, device) -> the device id Ray assigned (GPU only)."""

    def actor_options(self, seat: Seat) -> dict[str, Any]:
        """Ray options that put ``seat``'s worker in its first bundle with its share."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        first = seat.devices[0] if seat.devices else self.plan.used()[seat.node][0]
        strategy = PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=self.bundles[(seat.node, first)])
        share = seat.share if seat.devices else PROBE_SHARE
        resources = {"num_gpus": share, "num_cpus": 0} if self.resource == "GPU" \
            else {"num_cpus": share}
        return {"scheduling_strategy": strategy, **resources}

    def placed(self, seat: Seat) -> Placed:
        """What the worker of ``seat`` is told: its node, devices, cores and where its role's
        process group meets (rank 0's node address when the role spans nodes)."""
        devices = tuple(self.device_ids[(seat.node, d)] for d in seat.devices
                        if (seat.node, d) in self.device_ids)
        cores = self.plan.cores_of(seat) if self.resource == "CPU" else ()
        first = self.plan.of(seat.role)[0]
        host = self.addresses[first.node] if self.plan.spans_nodes(seat.role) else "127.0.0.1"
        return Placed(seat.role, seat.rank, seat.node, self.addresses[seat.node], devices,
                      cores, host)

    def rows(self) -> list[dict[str, Any]]:
        """Every seat with its node address and devices (``placement.json``, the start's
        lines): ``devices`` are Ray's GPU ids, or the plan's CPU cores on the node."""
        out = []
        for seat in self.plan.seats:
            placed = self.placed(seat)
            devices = placed.devices or tuple(str(d) for d in seat.devices)
            out.append({"role": seat.role, "rank": seat.rank, "node": seat.node,
                        "node_address": placed.node_address, "resource": self.resource,
                        "devices": list(devices), "cores": list(placed.cores),
                        "share": seat.share, "rendezvous_host": placed.rendezvous_host})
        return out

    def release(self) -> None:
        import ray

        ray.util.remove_placement_group(self.pg)


def reserve(plan: PlacementPlan, *, timeout_s: float) -> ClusterPlacement:
    """Reserve ``plan`` on the connected Ray cluster (see the module docstring)."""
    import ray
    from ray.util.placement_group import placement_group

    nodes = _live_nodes()
    resource = _resource(plan, nodes)
    chosen = _choose_nodes(plan, nodes, resource)
    bundles, order = [], {}
    for i, devices in enumerate(plan.used()):
        for d in devices:
            order[(i, d)] = len(bundles)
            bundles.append({resource: 1.0, f"node:{chosen[i]}": 0.001})
    pg = placement_group(bundles, strategy="PACK", name="")
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(pg)
        raise PlacementUnsatisfiable(
            f"the placement plan was not scheduled within schedule.start_timeout_s = "
            f"{timeout_s:g} s: it needs {_needs(plan, resource, chosen)}; the cluster has "
            f"{_cluster(_live_nodes())}")
    ids = _probe(pg, order, timeout_s) if resource == "GPU" else {}
    return ClusterPlacement(plan, resource, pg, order, chosen, ids)


def _live_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def _resource(plan: PlacementPlan, nodes: list[dict[str, Any]]) -> str:
    """``GPU`` or ``CPU``: the plan's accelerator; ``auto``: GPU when the cluster has any."""
    if plan.accelerator != "auto":
        return plan.resource()
    has_gpu = any(n.get("Resources", {}).get("GPU", 0) > 0 for n in nodes)
    return "GPU" if has_gpu else "CPU"


def _choose_nodes(plan: PlacementPlan, nodes: list[dict[str, Any]], resource: str) -> list[str]:
    """The addresses of the nodes the plan's nodes go to: the most capable first, each holding
    at least what its plan node uses; fails naming needs and the cluster."""
    need = [len(d) for d in plan.used()]
    ranked = sorted(nodes, key=lambda n: (-n["Resources"].get(resource, 0),
                                          n["NodeManagerAddress"]))
    chosen: list[str] = []
    free = list(ranked)
    for count in need:
        pick = next((n for n in free if n["Resources"].get(resource, 0) >= count), None)
        if pick is None:
            raise PlacementUnsatisfiable(
                f"the placement plan needs {_needs(plan, resource, None)}; the cluster has "
                f"{_cluster(nodes)}: add nodes or {resource}s, or change [resources] "
                "(nodes, devices_per_node, placement) or the engines' ranks and replicas")
        free.remove(pick)
        chosen.append(pick["NodeManagerAddress"])
    return chosen


def _needs(plan: PlacementPlan, resource: str, chosen: list[str] | None) -> str:
    parts = []
    for i, devices in enumerate(plan.used()):
        where = f" (on {chosen[i]})" if chosen else ""
        parts.append(f"node {i}{where}: {len(devices)} {resource}")
    return "; ".join(parts)


def _cluster(nodes: list[dict[str, Any]]) -> str:
    if not nodes:
        return "no live node"
    return "; ".join(
        f"{n['NodeManagerAddress']}: {n['Resources'].get('GPU', 0):g} GPU, "
        f"{n['Resources'].get('CPU', 0):g} CPU" for n in nodes)


def _probe(pg: Any, order: dict[tuple[int, int], int],
           timeout_s: float) -> dict[tuple[int, int], str]:
    """Which device Ray gave each GPU bundle (a tiny task in each reads its GPU ids)."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=0, num_gpus=PROBE_SHARE)
    def device_of() -> str:
        return ",".join(str(i) for i in ray.get_gpu_ids())

    refs = {slot: device_of.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=index)).remote() for slot, index in order.items()}
    deadline = time.monotonic() + timeout_s
    out = {}
    for slot, ref in refs.items():
        out[slot] = ray.get(ref, timeout=max(deadline - time.monotonic(), 1.0))
    return out
