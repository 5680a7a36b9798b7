"""Training and rollout engines, one wing per family.

``train/``: the ModelEngine contract and the FSDP2 / Megatron-core engines. ``rollout/``: the
RolloutEngine contract and the hf / vllm / sglang engines. ``distributed``: torch.distributed
setup and the all-reduce helpers both wings use (the communication device is always given).
"""
