"""Rollout engines: the RolloutEngine contract, the in-process weight sync, hf / server / vllm /
sglang.

``buckets``: the state-dict bucketer both server weight syncs (vllm, sglang) send weights with.
"""
