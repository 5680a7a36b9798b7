"""Built-in weight-sync methods (actor weights -> rollout engines).

Each is ``sync(weights, engine, version)``; its options are
``[engines.rollout.weight_sync_options]``, validated by the model registered here. All three
also move LoRA adapters alone (``adapters=True``: ``[engines.rollout] lora_sync = "adapter"``).
"""

from __future__ import annotations

from rlctl.hookspecs import hookimpl


@hookimpl
def register_weight_syncs(register) -> None:  # type: ignore[no-untyped-def]
    # Imported on use: the registry imports this module for `rlctl --help` (no pydantic).
    from rlctl.engines.rollout.sglang.options import SGLangWeightSyncOptions
    from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
    from rlctl.engines.rollout.weight_sync import InProcessOptions
    register(
        "in_process",
        "rlctl.engines.rollout.weight_sync:InProcessWeightSync",
        options=InProcessOptions,
        description="copy the actor's exported weights into a rollout engine in the same process",
        engines=("hf",),
        adapters=True,  # LoRA adapters: engine.update_adapter
    )
    register(
        "vllm",
        "rlctl.engines.rollout.vllm.weight_sync:VLLMWeightSync",
        options=VLLMWeightSyncOptions,
        description="vLLM weight-transfer lifecycle: pause -> start -> update per bucket (file, "
        "http_bytes; nccl/ipc on CUDA) -> finish -> resume; or collective_rpc reload_weights",
        engines=("vllm",),
        adapters=True,  # LoRA adapters: /v1/load_lora_adapter
    )
    register(
        "sglang",
        "rlctl.engines.rollout.sglang.weight_sync:SGLangWeightSync",
        options=SGLangWeightSyncOptions,
        description="SGLang /update_weights_from_tensor | _distributed | _disk inside "
                    "begin/end_weight_update",
        engines=("sglang",),
        adapters=True,  # LoRA adapters: /load_lora_adapter (CUDA builds: docs/lora.md)
    )
