"""torch.distributed setup and the few collectives engines need.

Callers (worker groups) set ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``;
a world of one needs nothing (a free loopback port is picked, whatever the environment
says). Rank 0's rendezvous store listens on ``MASTER_ADDR`` only
(:mod:`rlctl.engines.rendezvous`; rlctl's worker groups set 127.0.0.1), and on loopback
gloo / NCCL keep their connections on ``lo`` too.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from rlctl.engines.rendezvous import keep_collectives_local, tcp_store
from rlctl.ports import free_port

DEFAULT_TIMEOUT_S = 300.0


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
        # A fresh port, never one from the environment: a MASTER_PORT inherited from a parent
        # may be a port the parent's own store still holds. Not written back to os.environ, so
        # children of this process do not inherit it either.
        host, port = "127.0.0.1", free_port()
    else:
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


def group_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """The device collectives on ``group`` (``None``: the default group) take tensors on.

    CUDA (this process's current device) for an NCCL group, which rejects CPU tensors; CPU
    for gloo, and without a process group (nothing is reduced then).
    """
    if dist.is_initialized() and dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(
    value: float | torch.Tensor,
    device: str | torch.device,
    *,
    group: dist.ProcessGroup | None = None,
) -> float:
    """Sum of ``value`` over the ranks of ``group`` (the value itself without a process group).

    ``device`` is where the reduction runs: ``group_device(group)``, or the engine's device
    (cuda for nccl, cpu for gloo); there is no default, because a CPU tensor that works on
    gloo fails on NCCL with two or more GPUs. Use it for the global loss normaliser:
    ``all_reduce_sum(response_mask.sum(), engine.comm_device)`` is the token count of the
    whole minibatch across ranks.
    """
    t = _scalar("all_reduce_sum", value, torch.float64, device, group)
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return float(t.item())


def all_reduce_max_int(
    value: int, device: str | torch.device, *, group: dist.ProcessGroup | None = None
) -> int:
    """Max of ``value`` over the ranks of ``group``; ``device`` as for :func:`all_reduce_sum`."""
    t = _scalar("all_reduce_max_int", value, torch.long, device, group)
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return int(t.item())


def _scalar(
    what: str, value: float | torch.Tensor, dtype: torch.dtype, device: str | torch.device,
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """``value`` as a 0-d tensor on ``device``, refused when ``group`` cannot reduce there.

    Checked even with one rank (where nothing is sent), so a single-GPU run catches a call
    site that would break NCCL on two GPUs.
    """
    _require_group_if_distributed(what)
    device = torch.device(device)
    if dist.is_initialized():
        config = str(dist.get_backend_config(group))  # "cpu:gloo,cuda:gloo", "cuda:nccl"...
        served = {entry.split(":")[0] for entry in config.split(",")}
        if device.type not in served:
            raise ValueError(
                f"{what}: a {device.type} tensor cannot be reduced by this process group "
                f"({config}); pass the engine's communication device (group_device(group): "
                "cuda for nccl, cpu for gloo)"
            )
    return torch.as_tensor(value, dtype=dtype).detach().to(device).clone().reshape(())


def _require_group_if_distributed(what: str) -> None:
    """A multi-rank process without a process group would silently reduce over itself."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        raise RuntimeError(
            f"{what}: WORLD_SIZE={world} but torch.distributed is not initialised; call the "
            "engine's init() first (it joins the process group)"
        )
