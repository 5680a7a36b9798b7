"""Built-in data planes: ``memory``, ``ray`` (default for multi-process runs), ``transferqueue``.

Targets are lazy ``module:attr`` strings: the CLI lists them without importing torch/ray.
Each target is called as ``target(options, *, run_id) -> DataPlane``.
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_data_planes(register) -> None:
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.dataplane.options import MemoryOptions, RayOptions, TransferQueueOptions
    register(
        "memory",
        "rlctl.dataplane.memory:MemoryDataPlane",
        options=MemoryOptions,
        description="In-process, thread-safe store for --local runs and tests",
        multi_process=False,
    )
    register(
        "ray",
        "rlctl.dataplane.ray_plane:RayDataPlane",
        options=RayOptions,
        description="Tensors in Ray's object store, keys/tags in an index actor",
        multi_process=True,
    )
    register(
        "transferqueue",
        "rlctl.dataplane.transferqueue_plane:TransferQueueDataPlane",
        options=TransferQueueOptions,
        description="Adapter over TransferQueue 0.1.x (bytes in TQ, tags in rlctl's index actor)",
        multi_process=True,
    )
