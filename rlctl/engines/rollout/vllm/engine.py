"""The ``vllm`` rollout engine: vLLM OpenAI-compatible servers, token-in / token-out over HTTP.

Servers: ``replicas`` servers started as subprocesses from the interpreter in
``[engines.rollout.options] python`` (vLLM's own environment, see
``rlctl engines install``), or the servers listed in ``urls``; replicas, seeds, the HTTP
loop and the lifecycle are :class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine`'s.

Requests: ``POST /v1/completions`` with ``prompt`` as token ids, ``return_token_ids`` and
``logprobs=1``; the server runs with ``--logprobs-mode processed_logprobs`` so each log-prob is
the one of the distribution the token was drawn from (after temperature / top-k / top-p), like
the ``hf`` engine. Every request carries its own seed (engine seed and a request counter), so a
sequence of calls is reproducible whatever the server batches together.

Partial rollouts (``[algorithm.staleness] partial_rollout = "resume"``): at a weight update
``POST /abort_requests`` (dev mode) cuts every request short; each answers ``finish_reason =
"abort"`` with the tokens and log-probs it has, and the base engine resumes it on the new
weights.

Colocated memory (the step plan's ``rollout_memory = release``, on CUDA): the servers start
with ``--enable-sleep-mode``; ``POST /sleep?level=1`` while training runs, ``POST
/wake_up?tags=weights`` before the weight sync and ``?tags=kv_cache`` after it
(:mod:`rlctl.engines.rollout.server.memory`).

Weight sync: the ``vllm`` weight-sync plugin (:mod:`rlctl.engines.rollout.vllm.weight_sync`) owns
every update (vLLM's native weight-transfer lifecycle, or the ``reload`` fallback) and drives it
through the public surface of :class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine`.
The engine only starts its servers ready for that sync: the ``--weight-transfer-config``
backend comes from the sync's options in ``RolloutEngineSpec.weight_sync_options``
(:attr:`VLLMRolloutEngine.transfer_backend`). LoRA adapters (``spec.lora_adapters``): the
servers start with ``--enable-lora``; each request names the adapter the sync loaded last
(``"model": <adapter>``), which vLLM applies over the base weights.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.server.client import Replica, get_json
from rlctl.engines.rollout.server.engine import ServerRolloutEngine
from rlctl.engines.rollout.server.memory import MemoryRoutes, Route
from rlctl.engines.rollout.server.partial import Reply
from rlctl.engines.rollout.server.process import ServerCommand, ServerError
from rlctl.engines.rollout.vllm.options import VLLMOptions, VLLMWeightSyncOptions
from rlctl.engines.rollout.vllm.server import vllm_server_command

# Head sizes vLLM 0.32's CPU attention backend supports (``CPUAttentionBackend``); any other
# size starts a healthy server whose engine dies at the first request.
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


class VLLMRolloutEngine(ServerRolloutEngine):
    """Rollout through vLLM servers (see the module docstring)."""

    engine_name: ClassVar[str] = "vllm"
    options_model: ClassVar[type[VLLMOptions]] = VLLMOptions
    # dev mode (VLLM_SERVER_DEV_MODE=1); an empty body aborts every request in flight
    abort_path: ClassVar[str] = "/abort_requests"
    # Sleep mode (dev mode, CUDA): level 1 moves the weights to CPU memory and discards the
    # KV cache; "wait" lets a request still running finish first (none should be).
    memory_routes: ClassVar[MemoryRoutes | None] = MemoryRoutes(
        "vLLM sleep mode", Route("/sleep?level=1&mode=wait"),
        {"weights": Route("/wake_up?tags=weights"), "kv_cache": Route("/wake_up?tags=kv_cache")})

    def __init__(self, spec: RolloutEngineSpec) -> None:
        super().__init__(spec)
        # The servers start for the sync that will update them; another sync (a plugin's)
        # gets servers started for the ``vllm`` sync's defaults.
        given = spec.weight_sync_options
        sync = given if isinstance(given, VLLMWeightSyncOptions) else VLLMWeightSyncOptions()
        if sync.server_backend in ("nccl", "ipc") and not spec.device.startswith("cuda"):
            raise ValueError(
                f"[engines.rollout.weight_sync_options] transport = {sync.transport!r} is one of "
                f"vLLM's CUDA-only backends and the rollout device is {spec.device!r}; on CPU use "
                'transport = "file" or "http_bytes" (or method = "reload")'
            )
        self._transfer_backend = sync.server_backend

    @property
    def transfer_backend(self) -> str | None:
        """The ``--weight-transfer-config`` backend of the servers this engine starts (``None``:
        none, the ``reload`` method); attached servers were started by someone else."""
        return self._transfer_backend

    # ------------------------------------------------------------------ servers
    def server_command(self, index: int, model_dir: str) -> ServerCommand:
        return vllm_server_command(
            f"vllm[{index}]", self.options, model=model_dir, dtype=self.spec.model.dtype,
            seed=self.spec.seed + index, device=self.spec.device,
            transfer_backend=self._transfer_backend, lora=self.spec.lora_adapters,
            sleep_mode=self.releases_memory,
        )

    takes_api_key = True

    def with_api_key(self, command: ServerCommand, key: str) -> ServerCommand:
        """vLLM reads its key from ``VLLM_API_KEY`` (kept off the command line, which every
        local user can read); it guards the OpenAI routes rlctl generates with."""
        return replace(command, env={**command.env, "VLLM_API_KEY": key})

    def served_model(self, url: str) -> str:
        """The model name an attached server serves (``GET /v1/models``)."""
        models = get_json(url + "/v1/models", api_key=self.attached_api_key).get("data") or []
        if not models:
            raise ServerError(
                f"server {url} serves no model (GET /v1/models is empty); is it a vLLM server?"
            )
        return str(models[0]["id"])

    def check_model_dir(self, model_dir: Path) -> None:
        """Refuse, before a 30 s server start, a model the CPU attention backend cannot run."""
        config_path = model_dir / "config.json"
        if self.spec.device.startswith("cuda") or not config_path.is_file():
            return
        config = json.loads(config_path.read_text())
        config = config.get("text_config", config)
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        if head_dim not in CPU_HEAD_SIZES:
            raise ValueError(
                f"vLLM on CPU cannot run {config_path.parent}: head_dim = {head_dim}, and its CPU "
                f"attention supports only {list(CPU_HEAD_SIZES)}; for the tiny model set "
                "[model.tiny] head_dim = 32 (e.g. hidden_size = 128, num_attention_heads = 4), "
                "or use the hf rollout engine"
            )

    async def _warm_up(self, replica: Replica) -> None:
        body = {"model": replica.model, "prompt": [0], "max_tokens": 1, "temperature": 0}
        await self.post(replica, "/v1/completions", body)

    # ------------------------------------------------------------------ generation
    async def _request(
        self, replica: Replica, prompt_ids: list[int], s: SamplingParams, seed: int, version: int
    ) -> Reply:
        body = {
            "model": self.adapter or replica.model,  # the LoRA adapter, when one is served
            "prompt": prompt_ids,
            "max_tokens": s.max_new_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": s.top_k if s.top_k > 0 else -1,  # vLLM: -1 = off
            "logprobs": 1,  # 0 would return none; 1 = the sampled token (+ the top-1)
            "return_token_ids": True,
            "ignore_eos": self.options.ignore_eos,
        }
        if self.options.request_seeds:
            body["seed"] = seed
        if s.stop_token_ids:  # a tool loop ends the turn at a call (the token is kept)
            body["stop_token_ids"] = list(s.stop_token_ids)
        if s.json_schema is not None:  # constrained decoding (the gateway's response_format)
            body["structured_outputs"] = {"json": json.loads(s.json_schema)}
        data = await self.post(replica, "/v1/completions", body)
        try:
            choice = data["choices"][0]
            token_ids = [int(t) for t in choice["token_ids"]]
            # an abort before the first token answers without log-probs
            logprobs = choice["logprobs"] or {"token_logprobs": []}
            log_probs = [float(x) for x in logprobs["token_logprobs"]]
            finish = choice["finish_reason"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(
                f"server {replica.name} answered /v1/completions without token ids / log-probs "
                f"({exc!r}); is it a vLLM server with return_token_ids support (>= 0.10)? "
                f"answer: {str(data)[:500]}"
            ) from exc
        if len(log_probs) != len(token_ids):
            raise ServerError(
                f"server {replica.name} returned {len(token_ids)} tokens but {len(log_probs)} "
                "log-probs"
            )
        if finish not in ("stop", "length", "abort"):
            raise ServerError(
                f"server {replica.name} ended a request with finish_reason={finish!r}"
            )
        return Reply(token_ids, log_probs, finish)
