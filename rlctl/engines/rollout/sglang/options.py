"""Options of the ``sglang`` rollout engine (``[engines.rollout.options]``); no torch import.

The engine runs SGLang's native HTTP server (``python -m sglang.launch_server``) as a
subprocess, usually from its own Python environment (``python``: SGLang pins torch 2.14.1 and
transformers 5.19; build one with ``rlctl engines install sglang``), or attaches to
servers already running (``urls``).
"""

from __future__ import annotations

from pydantic import Field, PositiveInt

from rlctl.engines.rollout.server.options import ServerOptions
from rlctl.plugins.weight_syncs import SGLangWeightSyncOptions


class SGLangOptions(ServerOptions):
    """Options of the ``sglang`` rollout engine (``sglang.launch_server``, native ``/generate``)."""

    server_module: str = "sglang.launch_server"
    """Module run with ``python -m``."""
    attention_backend: str | None = None
    """``--attention-backend``; ``None`` = ``torch_native`` on CPU, SGLang's choice on GPU."""
    mem_fraction_static: float = Field(0.5, gt=0, le=1)
    """``--mem-fraction-static`` on GPU: fraction of device memory for weights and KV cache."""
    max_total_tokens: PositiveInt | None = None
    """``--max-total-tokens`` (KV-cache size in tokens); ``None`` = 65,536 on CPU, SGLang's on GPU."""
    disable_cuda_graph: bool | None = None
    """Run without CUDA graphs (faster start); ``None`` = on CPU only (there are none there)."""
    deterministic_inference: bool = False
    """``--enable-deterministic-inference``: batch-invariant kernels, and the only mode in which
    SGLang honours each request's ``sampling_seed``; not available with ``torch_native`` (CPU)."""
    enable_radix_cache: bool = True
    """Reuse KV cache across requests that share a prefix (flushed at every weight update)."""
    ignore_eos: bool = False
    """Generate ``max_new_tokens`` tokens even after an eos (throughput tests, benchmarks)."""
    max_concurrent_requests: PositiveInt = 512
    """Most requests in flight at once from this engine (all replicas together)."""
    log_dir: str | None = None
    """Directory for the servers' log files; ``None`` = a temporary directory."""
    weight_sync: SGLangWeightSyncOptions = SGLangWeightSyncOptions()
    """Weight-sync options (transport...); the fields set here override the ``sglang`` weight
    sync's own, since the recipe has no section for weight-sync options yet."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server processes (e.g. ``SGLANG_CPU_OMP_THREADS_BIND``)."""
