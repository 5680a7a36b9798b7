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

Weight sync: the ``vllm`` weight-sync plugin (:mod:`rlctl.engines.rollout.vllm.weight_sync`) drives
vLLM's native weight-transfer lifecycle over this engine's replicas and stamps the version with
:meth:`VLLMRolloutEngine.stamp_version`. This engine's own :meth:`~VLLMRolloutEngine.update_weights`
is the ``method = "reload"`` fallback: it writes the state dict to one safetensors file and asks
every server to ``/collective_rpc`` ``reload_weights`` from it (vLLM CPU repacks its linear
weights after loading, so a plain ``load_weights`` would fail; the worker's ``reload_weights``
repacks). Requests in flight finish on the old weights first (``/pause?mode=wait``), the prefix
cache is reset (its KV was computed by the old weights), then ``/resume``. The staging file must
be readable by the servers: attached servers (``urls``) must share this machine's filesystem.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rlctl.engines.rollout.contract import Generation, RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.server.client import Replica, get_json
from rlctl.engines.rollout.server.process import ServerCommand, ServerError
from rlctl.engines.rollout.server.engine import ServerRolloutEngine
from rlctl.engines.rollout.vllm.options import VLLMOptions
from rlctl.engines.rollout.vllm.server import vllm_server_command

if TYPE_CHECKING:
    import torch

# Head sizes vLLM 0.32's CPU attention backend supports (``CPUAttentionBackend``); any other
# size starts a healthy server whose engine dies at the first request.
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


class VLLMRolloutEngine(ServerRolloutEngine):
    """Rollout through vLLM servers (see the module docstring)."""

    engine_name: ClassVar[str] = "vllm"
    options_model: ClassVar[type[VLLMOptions]] = VLLMOptions

    def __init__(self, spec: RolloutEngineSpec) -> None:
        super().__init__(spec)
        sync = self.options.weight_sync
        if sync.method == "native" and sync.transport in ("nccl", "ipc") and not spec.device.startswith("cuda"):
            raise ValueError(
                f"[engines.rollout.options.weight_sync] transport = {sync.transport!r} is one of "
                f"vLLM's CUDA-only backends and the rollout device is {spec.device!r}; on CPU use "
                'transport = "file" or "http_bytes" (or method = "reload")'
            )

    # ------------------------------------------------------------------ servers
    def server_command(self, index: int, model_dir: str) -> ServerCommand:
        recipe = self.spec.recipe
        return vllm_server_command(
            f"vllm[{index}]", self.options, model=model_dir, dtype=recipe.model.dtype,
            seed=self.spec.seed + index, device=self.spec.device,
        )

    def served_model(self, url: str) -> str:
        """The model name an attached server serves (``GET /v1/models``)."""
        models = get_json(url + "/v1/models").get("data") or []
        if not models:
            raise ServerError(f"server {url} serves no model (GET /v1/models is empty); is it a vLLM server?")
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
        await self._post(replica, "/v1/completions", body)

    # ------------------------------------------------------------------ generation
    async def _generate_one(self, prompt_ids: list[int], s: SamplingParams, seed: int) -> Generation:
        if not prompt_ids:
            raise ValueError("a prompt is empty: every request needs at least one token")
        replica = self._next_replica()
        version = self._version
        body = {
            "model": replica.model,
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
        data = await self._post(replica, "/v1/completions", body)
        try:
            choice = data["choices"][0]
            token_ids = [int(t) for t in choice["token_ids"]]
            log_probs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
            finish = choice["finish_reason"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(
                f"server {replica.name} answered /v1/completions without token ids / log-probs "
                f"({exc!r}); is it a vLLM server with return_token_ids support (>= 0.10)? "
                f"answer: {str(data)[:500]}"
            ) from exc
        if len(log_probs) != len(token_ids):
            raise ServerError(
                f"server {replica.name} returned {len(token_ids)} tokens but {len(log_probs)} log-probs"
            )
        if finish not in ("stop", "length"):
            raise ServerError(f"server {replica.name} ended a request with finish_reason={finish!r}")
        return Generation(token_ids=token_ids, log_probs=log_probs, finish_reason=finish, weight_version=version)

    # ------------------------------------------------------------------ weights
    def update_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Load full weights (HF names) into every server and stamp ``version``."""
        self.check_names(state_dict, version)
        path = self._stage_weights(state_dict)
        started = time.monotonic()

        async def update(replica: Replica) -> None:
            # In-flight requests finish on the old weights; new ones wait until /resume.
            await self._post(replica, "/pause?mode=wait", None)
            try:
                await self._post(
                    replica, "/collective_rpc",
                    {"method": "reload_weights", "kwargs": {"weights_path": str(path)}},
                )
                await self._post(replica, "/reset_prefix_cache", None)  # KV of the old weights
            except BaseException:
                # Try to un-pause, but report the failure that matters, not this one.
                with contextlib.suppress(ServerError):
                    await self._post(replica, "/resume", None)
                raise
            await self._post(replica, "/resume", None)

        try:
            self.run_on_replicas(update)
        except ServerError as exc:
            raise ServerError(f"weight update to version {version} failed: {exc}") from exc
        self._version = int(version)
        self.last_update_s = time.monotonic() - started

    def stamp_version(self, version: int) -> None:
        """Stamp ``version`` on every later generation (the weight sync calls it after a sync)."""
        self._version = int(version)

    def _stage_weights(self, state_dict: Mapping[str, torch.Tensor]) -> Path:
        """Write ``state_dict`` to ``<staging>/model.safetensors`` atomically; return the directory."""
        from safetensors.torch import save_file

        from rlctl.engines.rollout.vllm.weight_sync import cpu_tensors

        if not state_dict:
            raise ValueError(
                "vllm weight update got an empty state dict: with several training ranks only "
                "rank 0 holds the full weights; sync from rank 0"
            )
        staging = self.options.weight_sync.staging_dir
        weights_dir = Path(staging) if staging else self.workdir / "weights"
        weights_dir.mkdir(parents=True, exist_ok=True)
        tensors = dict(cpu_tensors(state_dict))
        tmp = weights_dir / ".model.safetensors.tmp"
        save_file(tensors, str(tmp))
        # One fixed path: reload_weights repoints the server's model path at this directory.
        os.replace(tmp, weights_dir / "model.safetensors")
        return weights_dir
