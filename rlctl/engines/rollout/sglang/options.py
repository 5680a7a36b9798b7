"""Options of the ``sglang`` rollout engine and of its ``sglang`` weight sync; no torch import.

The engine (``[engines.rollout.options]``, :class:`SGLangOptions`) runs SGLang's native HTTP
server (``python -m sglang.launch_server``) as a subprocess, usually from its own Python
environment (``python``: SGLang pins torch 2.14.1 and transformers 5.19; build one with
``rlctl engines install sglang``), or attaches to servers already running (``urls``).
The weight sync's options are ``[engines.rollout.weight_sync_options]``
(:class:`SGLangWeightSyncOptions`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.server.options import ServerOptions


class SGLangWeightSyncOptions(BaseModel):
    """Options of the ``sglang`` weight sync (``[engines.rollout.weight_sync_options]``)."""

    model_config = STRICT_CONFIG

    transport: Literal["disk", "tensor", "distributed"] = "tensor"
    """``/update_weights_from_disk``, ``..._from_tensor`` or ``..._from_distributed``."""
    bucket_mb: PositiveInt = 512
    """Tensors are sent in buckets of about this size (``tensor``, ``distributed``)."""
    flush_cache: bool = True
    """Flush the radix cache after the update (stale KV entries)."""
    timeout_s: float = Field(300.0, gt=0)
    """Seconds an update (and joining the ``distributed`` group) may take before it fails."""
    group_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """``distributed``: process-group backend; ``auto`` = nccl on GPU, gloo on CPU."""
    master_address: str = "127.0.0.1"
    """``distributed``: address the servers use to reach this process (rank 0 of the group)."""
    staging_dir: str | None = None
    """``disk``: directory servers read the safetensors file from; ``None`` = a temporary one."""


class SGLangOptions(ServerOptions):
    """Options of the ``sglang`` rollout engine (``sglang.launch_server``, native ``/generate``)."""

    server_module: str = "sglang.launch_server"
    """Module run with ``python -m``."""
    attention_backend: str | None = None
    """``--attention-backend``; ``None`` = ``torch_native`` on CPU, SGLang's choice on GPU."""
    mem_fraction_static: float = Field(0.5, gt=0, le=1)
    """``--mem-fraction-static`` on GPU: fraction of device memory for weights and KV cache."""
    max_total_tokens: PositiveInt | None = None
    """``--max-total-tokens`` (KV-cache size in tokens); ``None`` = 65,536 on CPU, SGLang's on
    GPU."""
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
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server processes (e.g.
    ``SGLANG_CPU_OMP_THREADS_BIND``)."""
