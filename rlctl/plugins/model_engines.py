"""Built-in model (training) engines: ``fsdp`` (FSDP2) and ``megatron`` (Megatron-core)."""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_model_engines(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.engines.train.fsdp.options import FSDPOptions
    from rlctl.engines.train.megatron.options import MegatronOptions
    register(
        "fsdp",
        "rlctl.engines.train.fsdp.engine:FSDPEngine",
        options=FSDPOptions,
        description="torch FSDP2 (fully_shard): gloo on CPU, NCCL on GPU; actor, ref and critic",
    )
    register(
        "megatron",
        "rlctl.engines.train.megatron.engine:MegatronEngine",
        options=MegatronOptions,
        description="Megatron-core TP/PP/DP (pip install megatron-core==0.16.1); actor, ref, critic",
    )
