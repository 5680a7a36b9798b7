"""Options every server-mode rollout engine shares (``vllm``, ``sglang``); no torch import."""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG


class ServerOptions(BaseModel):
    """Where the servers come from and how long they may take."""

    model_config = STRICT_CONFIG

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
