"""Built-in rollout engines: ``hf`` (transformers generate), ``vllm`` and ``sglang`` (server mode)."""

from __future__ import annotations

from rlctl.engines.rollout.hf.options import HFRolloutOptions
from rlctl.engines.rollout.sglang.options import SGLangOptions
from rlctl.engines.rollout.vllm.options import VLLMOptions
from rlctl.hookspecs import hookimpl


@hookimpl
def register_rollout_engines(register) -> None:  # type: ignore[no-untyped-def]
    register(
        "hf",
        "rlctl.engines.rollout.hf.engine:HFRolloutEngine",
        options=HFRolloutOptions,
        description="transformers generate with sampling, in-process (CPU / small models)",
        weight_sync="in_process",
    )
    register(
        "vllm",
        "rlctl.engines.rollout.vllm.engine:VLLMRolloutEngine",
        options=VLLMOptions,
        description="vLLM OpenAI-compatible server(s), token-in/token-out over HTTP",
        weight_sync="vllm",
    )
    register(
        "sglang",
        "rlctl.engines.rollout.sglang.engine:SGLangRolloutEngine",
        options=SGLangOptions,
        description="SGLang server(s), token-in/token-out over the native /generate",
        weight_sync="sglang",
    )
