"""Built-in rollout engines: ``hf`` (transformers generate), ``vllm`` (server mode), ``sglang`` (not yet)."""

from __future__ import annotations

from pydantic import Field

from rlctl.engines.hf_rollout_options import HFRolloutOptions
from rlctl.engines.server_options import ServerOptions
from rlctl.engines.vllm_options import VLLMOptions
from rlctl.hookspecs import hookimpl


class SGLangOptions(ServerOptions):
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
