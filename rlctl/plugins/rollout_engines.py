"""Built-in rollout engines: ``hf`` (transformers generate), ``vllm`` (server mode), ``sglang`` (not yet)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from rlctl.engines.hf_rollout_options import HFRolloutOptions
from rlctl.engines.vllm_options import VLLMOptions
from rlctl.hookspecs import hookimpl


class _ServerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    urls: list[str] = []
    """Already running servers to use; empty = start servers."""
    python: str | None = None
    """Interpreter that starts servers (an engine often needs its own venv); ``None`` = this one."""
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


class SGLangOptions(_ServerOptions):
    """Options of the ``sglang`` rollout engine (``sglang.launch_server``)."""

    server_module: str = "sglang.launch_server"
    """Module run with ``python -m``."""
    attention_backend: str | None = None
    """``--attention-backend`` (``torch_native`` on CPU)."""
    mem_fraction_static: float = Field(0.5, gt=0, le=1)
    """``--mem-fraction-static``."""


@hookimpl
def register_rollout_engines(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "hf",
        "rlctl.engines.hf_rollout:HFRolloutEngine",
        options=HFRolloutOptions,
        description="transformers generate with sampling, in-process (CPU / small models)",
        weight_sync="in_process",
    )
    register(
        "vllm",
        "rlctl.engines.vllm_rollout:VLLMRolloutEngine",
        options=VLLMOptions,
        description="vLLM OpenAI-compatible server(s), token-in/token-out over HTTP",
        weight_sync="vllm",
    )
    register(
        "sglang",
        None,
        options=SGLangOptions,
        description="SGLang server - not implemented yet",
        weight_sync="sglang",
    )
