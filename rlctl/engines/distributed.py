"""torch.distributed setup and the few collectives engines need.

Callers (worker groups) set ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``;
a world of one needs nothing (a free loopback port is picked). Rank 0's rendezvous store
listens on ``MASTER_ADDR`` only (:mod:`rlctl.engines.rendezvous`; rlctl's worker groups set
127.0.0.1), and on loopback gloo / NCCL keep their connections on ``lo`` too.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from rlctl.engines.rendezvous import keep_collectives_local, tcp_store

DEFAULT_TIMEOUT_S = 300.0


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def backend_for(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def ensure_process_group(rank: int, world_size: int, device: str) -> None:
    """Initialise the default process group once per process (no-op when it exists)."""
    if dist.is_initialized():
        if dist.get_world_size() != world_size or dist.get_rank() != rank:
            raise RuntimeError(
                f"torch.distributed is already initialised as rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, but this engine expects rank {rank} of "
                f"{world_size}: run engines of different world sizes in separate processes"
            )
        return
    if world_size == 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise RuntimeError(
                f"{var} is not set: a {world_size}-rank engine needs MASTER_ADDR and "
                "MASTER_PORT from the worker group that started it"
            )
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    # gloo and NCCL pick the first interface by default; loopback keeps single-node runs local.
    keep_collectives_local(host)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    timeout = timedelta(seconds=float(os.environ.get("RLCTL_DIST_TIMEOUT_S", DEFAULT_TIMEOUT_S)))
    # Our own store, not env://: torch's would listen on every interface.
    store = tcp_store(host, port, world_size, is_master=rank == 0, timeout=timeout)
    dist.init_process_group(
        backend=backend_for(device),
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
    )


def all_reduce_sum(value: float | torch.Tensor, device: str = "cpu") -> float:
    """Sum of ``value`` over all ranks (the value itself without a process group).

    Use it for the global loss normaliser: ``all_reduce_sum(response_mask.sum())`` is the
    token count of the whole minibatch across ranks.
    """
    _require_group_if_distributed("all_reduce_sum")
    t = torch.as_tensor(value, dtype=torch.float64, device=device).clone().reshape(())
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item())


def all_reduce_max_int(value: int, device: str = "cpu") -> int:
    """Max of ``value`` over all ranks."""
    _require_group_if_distributed("all_reduce_max_int")
    t = torch.tensor(value, dtype=torch.long, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def _require_group_if_distributed(what: str) -> None:
    """A multi-rank process without a process group would silently reduce over itself."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        raise RuntimeError(
            f"{what}: WORLD_SIZE={world} but torch.distributed is not initialised; call the "
            "engine's init() first (it joins the process group)"
        )
