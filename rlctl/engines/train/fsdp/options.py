"""Options of the ``fsdp`` training engine (``[engines.train.options]``); no torch import."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from rlctl.config.strict import STRICT_CONFIG


class FSDPOptions(BaseModel):
    """How FSDP2 shards and runs the model; none of these change the math."""

    model_config = STRICT_CONFIG

    mixed_precision: Literal["none", "bf16"] = "none"
    """``bf16``: compute in bfloat16, reduce gradients and keep master weights in fp32."""
    reshard_after_forward: bool = True
    """Free gathered parameters after forward (ZeRO-3); ``False`` keeps them (ZeRO-2)."""
    cpu_offload: bool = False
    """Keep sharded parameters, gradients and optimizer state in host memory (GPU only)."""
