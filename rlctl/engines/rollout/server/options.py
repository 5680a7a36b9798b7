"""Options every server-mode rollout engine shares (``vllm``, ``sglang``); no torch import."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, PositiveInt, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from rlctl.config.strict import STRICT_CONFIG

WEIGHT_SYNC_OPTIONS = "engines.rollout.weight_sync_options"
"""Where weight-sync options live (the registered sync's model validates them)."""


class ServerOptions(BaseModel):
    """Where the servers come from and how long they may take."""

    model_config = STRICT_CONFIG

    @model_validator(mode="before")
    @classmethod
    def _weight_sync_moved(cls, data: Any) -> Any:
        """``[engines.rollout.options.weight_sync]`` was the old home of weight-sync options:
        say where they are now instead of calling the key unknown."""
        if isinstance(data, dict) and "weight_sync" in data:
            error = PydanticCustomError(
                "moved_key", "weight-sync options are no longer engine options",
                {"to": WEIGHT_SYNC_OPTIONS},
            )
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                type=error, loc=("weight_sync",), input=data["weight_sync"])])
        return data

    urls: list[str] = []
    """Already running servers to use; empty = start servers."""
    python: str | None = None
    """Interpreter that starts servers (engines pin their own torch); ``None`` = ``RLCTL_<ENGINE>_PYTHON``, else the env ``rlctl engines install`` built, else this one."""
    extra_args: list[str] = []
    """Extra command-line arguments for the server."""
    tensor_parallel_size: PositiveInt = 1
    """Devices per server replica."""
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)
    """Fraction of device memory the server may take (KV cache included)."""
    max_model_len: PositiveInt | None = None
    """Longest prompt + response; ``None`` = the model's."""
    startup_timeout_s: float = Field(300.0, gt=0)
    """Seconds a server may take to become healthy."""
    request_timeout_s: float = Field(600.0, gt=0)
    """Seconds one generation request may take."""
