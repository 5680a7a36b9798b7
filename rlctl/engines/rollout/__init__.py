"""Rollout engines: the RolloutEngine contract, the in-process weight sync, hf / server / vllm / sglang."""
