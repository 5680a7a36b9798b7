"""Built-in staleness policies (``[algorithm.staleness] policy = NAME``)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_staleness_policies(register) -> None:
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.algorithms.staleness import BoundedOptions
    register(
        "on_policy",
        "rlctl.algorithms.staleness:OnPolicy",
        description="nothing in flight past the training step: the sync trainer, bit for bit",
    )
    register(
        "bounded",
        "rlctl.algorithms.staleness:Bounded",
        options=BoundedOptions,
        description="stream up to max_staleness weight updates behind; wait or drop-and-refill",
    )
