"""How a spawned test rank leaves its gloo group.

A rank that exits with its group alive, or destroys it while a peer is still busy (saving the
results), aborted now and then in gloo's teardown ("terminate called without an active
exception", SIGABRT): the ranks meet at a barrier first, then destroy the group. After a
failure there is no barrier (the peer may never arrive), only the destroy.
"""

from __future__ import annotations


def leave_process_group(*, ok: bool) -> None:
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if ok:
        dist.barrier()
    dist.destroy_process_group()
