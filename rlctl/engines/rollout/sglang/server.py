""":func:`sglang_server_command`: the command line of SGLang's native HTTP server.

The server is started with ``python -m sglang.launch_server`` from the interpreter of its own
environment (SGLang pins torch 2.14.1 and transformers 5.19, which need not be the trainer's),
bound to 127.0.0.1 on a free port. On CPU it needs ``SGLANG_USE_CPU_ENGINE=1 --device cpu``
and the ``torch_native`` attention backend (the other backends are CUDA kernels); CUDA graphs
are off there. Readiness is ``GET /health_generate``, which runs a real one-token generation:
plain ``/health`` answers before the scheduler can serve. Launching, health checks and
reaping are :mod:`rlctl.engines.rollout.server.process`'s.
"""

from __future__ import annotations

from rlctl.config.lora import ALL_LINEAR, LoRASection
from rlctl.engines.rollout.server.engine_envs import engine_python, is_foreign
from rlctl.engines.rollout.server.process import (
    PYTHON_ENV_VARS,
    SERVED_MODEL_NAME,
    ServerCommand,
)
from rlctl.engines.rollout.sglang.options import SGLangOptions
from rlctl.ports import free_port

__all__ = ["CPU_MAX_TOTAL_TOKENS", "CPU_NO_ADAPTERS", "HEALTH_PATH", "sglang_server_command"]

HEALTH_PATH = "/health_generate"
"""Readiness probe: answers 200 only once a real generation went through."""
CPU_MAX_TOTAL_TOKENS = 65_536
"""KV-cache tokens on CPU when ``max_total_tokens`` is not set: SGLang would otherwise size the
cache from free host RAM (``mem_fraction_static`` of it), too much on a shared machine."""
CPU_NO_ADAPTERS = (
    "SGLang's CPU build cannot load LoRA adapters: every LoRA layer of SGLang 0.5 pins host "
    "memory (pin_memory=True), which needs a CUDA driver, and the server dies at start "
    "(measured with sglang 0.5.23 on CPU)")
"""Why adapter-only syncs need SGLang on CUDA (the recipe check and the engine say it)."""


def sglang_server_command(
    name: str,
    options: SGLangOptions,
    *,
    model: str,
    dtype: str,
    seed: int,
    device: str,
    lora: LoRASection | None = None,
    memory_saver: bool = False,
    port: int | None = None,
) -> ServerCommand:
    """The command that starts one SGLang server for ``model`` (a local checkpoint directory);
    ``lora``: the run's ``[model.lora]`` when the sync loads adapters (room for adapters of
    its rank on its modules, two per batch while a sync swaps versions; on CPU SGLang's
    ``torch_native`` LoRA backend, but its CPU build loads none: :data:`CPU_NO_ADAPTERS`);
    ``memory_saver``: able to release its memory, the weights backed up in CPU memory (CUDA
    only: the release crashes the CPU server)."""
    port = free_port() if port is None else port
    python = engine_python("sglang", options.python)
    foreign = is_foreign(python)  # the engine's own env must not see this venv's packages
    on_cpu = not device.startswith("cuda")
    argv = [
        python, "-m", options.server_module,
        "--model-path", model,
        "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", dtype,
        "--random-seed", str(seed),
        "--tp-size", str(options.tensor_parallel_size),
        "--mem-fraction-static", str(options.mem_fraction_static),
        # Sampling follows the recipe only: a checkpoint's generation_config.json (Qwen ships
        # top_k=20, a repetition penalty...) would otherwise become every request's default.
        "--sampling-defaults", "openai",
        # Each request's log is noise at RL request rates; errors are still logged.
        "--log-level-http", "warning",
    ]
    argv += _device_args(options, on_cpu=on_cpu)
    if options.max_model_len is not None:
        argv += ["--context-length", str(options.max_model_len)]
    if options.deterministic_inference:
        argv.append("--enable-deterministic-inference")
    if not options.enable_radix_cache:
        argv.append("--disable-radix-cache")
    if memory_saver:
        argv += ["--enable-memory-saver", "--enable-weights-cpu-backup"]
    if lora is not None:
        argv += _lora_args(lora, on_cpu=on_cpu)
    argv += list(options.extra_args)
    # Log-probs of the temperature-scaled distribution tokens are drawn from (the trainer's
    # log_softmax(logits / T)): SGLang's default, pinned here against an inherited setting
    # that would make it return the T = 1 values.
    env = {"SGLANG_RETURN_ORIGINAL_LOGPROB": "0"}
    if on_cpu:
        env["SGLANG_USE_CPU_ENGINE"] = "1"
    env.update(options.env)
    unset = PYTHON_ENV_VARS if foreign else ()
    return ServerCommand(
        name=name, argv=argv, port=port, env=env, unset_env=unset, health_path=HEALTH_PATH
    )


def _device_args(options: SGLangOptions, *, on_cpu: bool) -> list[str]:
    """Attention backend, device, CUDA graphs and KV-cache size: on CPU the defaults are the
    ones that run there (torch_native attention, no graphs, a bounded cache)."""
    argv: list[str] = []
    attention = options.attention_backend or ("torch_native" if on_cpu else None)
    if attention is not None:
        argv += ["--attention-backend", attention]
    if on_cpu:
        argv += ["--device", "cpu"]
    no_graphs = on_cpu if options.disable_cuda_graph is None else options.disable_cuda_graph
    if no_graphs:
        argv += [
            "--cuda-graph-backend-decode",
            "disabled",
            "--cuda-graph-backend-prefill",
            "disabled",
        ]
    max_tokens = options.max_total_tokens or (CPU_MAX_TOTAL_TOKENS if on_cpu else None)
    if max_tokens is not None:
        argv += ["--max-total-tokens", str(max_tokens)]
    return argv


def _lora_args(lora: LoRASection, *, on_cpu: bool) -> list[str]:
    """Room for adapters of the run's rank on its modules, two per batch while a sync swaps
    versions."""
    targets = (["all"] if lora.target_modules == ALL_LINEAR  # SGLang knows leaf names only
               else sorted({m.rsplit(".", 1)[-1] for m in lora.target_modules}))
    argv = ["--enable-lora", "--max-lora-rank", str(lora.rank),
            "--lora-target-modules", *targets, "--max-loras-per-batch", "2"]
    if on_cpu:  # the default (csgmv) and the other LoRA backends are Triton kernels
        argv += ["--lora-backend", "torch_native"]
    return argv
