"""The ``vllm`` rollout engine: vLLM servers, their command line and weight sync."""
