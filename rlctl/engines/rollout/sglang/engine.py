"""The ``sglang`` rollout engine: SGLang servers, token-in / token-out over the native
``/generate``.

Servers: ``replicas`` servers started as subprocesses from the interpreter in
``[engines.rollout.options] python`` (SGLang's own environment, see
``rlctl engines install sglang``), or the servers listed in ``urls``; replicas, seeds,
the HTTP loop and the lifecycle are
:class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine`'s.

Requests: ``POST /generate`` with ``input_ids``, ``sampling_params`` (including a per-request
``sampling_seed``: the engine seed and a request counter) and ``return_logprob``. SGLang
honours ``sampling_seed`` only with ``deterministic_inference = true``, which its CPU attention
backend (``torch_native``) does not support: on CPU samples are not reproducible run to run.
SGLang's sampler returns ``log(softmax(logits / T))`` of the sampled token, over the whole
vocabulary, which is exactly the trainer's ``log_softmax(logits / T)`` (greedy requests:
T = 1, also the trainer's convention). With top-k / top-p the value is still that of the
temperature-scaled distribution, not of the truncated one.

Weight versions: servers we start begin at ``--weight-version 0``; every update passes the new
version, and every answer carries the version the server generated with
(``meta_info.weight_version``). A generation whose version is not the one the engine expects
fails loudly instead of feeding stale samples to the trainer.

Partial rollouts (``[algorithm.staleness] partial_rollout = "resume"``): at a weight update
``POST /abort_request {"abort_all": true}`` cuts every request short; each answers
``finish_reason.type = "abort"`` with the tokens and log-probs it has (and the old version),
and the base engine resumes it on the new weights.

Colocated memory (the step plan's ``rollout_memory = release``, on CUDA): the servers start
with ``--enable-memory-saver --enable-weights-cpu-backup``; ``POST /release_memory_occupation``
while training runs, ``POST /resume_memory_occupation`` with ``tags = ["weights"]`` before the
weight sync and ``["kv_cache", "cuda_graph"]`` after it
(:mod:`rlctl.engines.rollout.server.memory`).

Weight sync: the ``sglang`` weight sync (:mod:`rlctl.engines.rollout.sglang.weight_sync`, options
in ``[engines.rollout.weight_sync_options]``) owns every update and drives it through the
public surface of :class:`~rlctl.engines.rollout.server.engine.ServerRolloutEngine`; it calls
:meth:`SGLangRolloutEngine.stamp_version` once every server reports the new version.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from rlctl.engines.rollout.contract import SamplingParams
from rlctl.engines.rollout.server.client import Replica, get_json
from rlctl.engines.rollout.server.engine import ServerRolloutEngine
from rlctl.engines.rollout.server.memory import MemoryRoutes, Route
from rlctl.engines.rollout.server.partial import Reply
from rlctl.engines.rollout.server.process import ServerCommand, ServerError
from rlctl.engines.rollout.sglang.options import SGLangOptions
from rlctl.engines.rollout.sglang.server import (
    CPU_NO_ADAPTERS,
    HEALTH_PATH,
    sglang_server_command,
)


class SGLangRolloutEngine(ServerRolloutEngine):
    """Rollout through SGLang servers (see the module docstring)."""

    engine_name: ClassVar[str] = "sglang"
    options_model: ClassVar[type[SGLangOptions]] = SGLangOptions
    health_path: ClassVar[str] = HEALTH_PATH
    abort_path: ClassVar[str] = "/abort_request"
    abort_body: ClassVar[dict[str, Any]] = {"abort_all": True}
    # The memory saver (CUDA): every tag released, the weights backed up in CPU memory; the
    # CUDA graphs come back with the KV cache, after the weight sync (as slime orders it).
    memory_routes: ClassVar[MemoryRoutes | None] = MemoryRoutes(
        "SGLang's memory saver", Route("/release_memory_occupation", {}),
        {"weights": Route("/resume_memory_occupation", {"tags": ["weights"]}),
         "kv_cache": Route("/resume_memory_occupation", {"tags": ["kv_cache", "cuda_graph"]})})

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        # What each server calls our version 0: attached servers keep their own label
        # (``default`` unless started with --weight-version); later versions are str(version).
        self._initial_labels: dict[str, str] = {}
        self._vocab_size: int | None = None  # of the checkpoint we serve (None when attached)
        if spec.lora_adapters is not None and not self.servers_load_adapters():
            raise ValueError(f"[engines.rollout] lora_sync = \"adapter\": {CPU_NO_ADAPTERS}; "
                             "set lora_sync = \"merged\" (full weights, which it loads)")

    def servers_load_adapters(self) -> bool:
        """Whether the servers this engine starts can load LoRA adapters: on CUDA only, SGLang's
        CPU build cannot (:data:`~rlctl.engines.rollout.sglang.server.CPU_NO_ADAPTERS`).
        (rlctl's tests override it for a CPU server started under their test-only shim,
        ``tests/engines/rollout/sglang/shim``, which removes that one blocker.)"""
        return self.spec.device.startswith("cuda")

    # ------------------------------------------------------------------ servers
    def server_command(self, index: int, model_dir: str) -> ServerCommand:
        command = sglang_server_command(
            f"sglang[{index}]", self.options, model=model_dir, dtype=self.spec.model.dtype,
            seed=self.spec.seed + index, device=self.spec.device, lora=self.spec.lora_adapters,
            memory_saver=self.releases_memory,
        )
        command.argv.extend(["--weight-version", "0"])
        return command

    takes_api_key = True

    def with_api_key(self, command: ServerCommand, key: str) -> ServerCommand:
        """SGLang reads no variable for its key, and a command line is readable by every local
        user: the key goes into a 0600 ``--config`` YAML file in the engine's private work
        directory. It guards every route but the health probes. (SGLang itself prints its
        arguments, the key among them, into the server's log in that directory.)"""
        path = self.workdir / f"{command.name.replace('[', '-').rstrip(']')}-api-key.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f'api-key: "{key}"\n')  # token_urlsafe: letters, digits, - and _
        return replace(command, argv=[*command.argv, "--config", str(path)])

    def served_model(self, url: str) -> str:
        """The model name an attached server serves (``GET /model_info``); also notes its
        version."""
        info = get_json(url + "/model_info", api_key=self.attached_api_key)
        self._initial_labels[url] = str(info.get("weight_version"))
        return str(info.get("served_model_name") or info.get("model_path"))

    def check_model_dir(self, model_dir: Path) -> None:
        """Remember the vocabulary size: SGLang's CPU path does not check prompt ids, and an id
        past the embedding kills the whole server (IndexError in the scheduler, measured)."""
        config_path = model_dir / "config.json"
        if config_path.is_file():
            config = json.loads(config_path.read_text())
            self._vocab_size = int(config.get("text_config", config)["vocab_size"])

    async def _warm_up(self, replica: Replica) -> None:
        body = {"input_ids": [0], "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}
        await self.post(replica, "/generate", body)

    def version_label(self, replica: Replica, version: int) -> str:
        """The ``weight_version`` string ``replica`` reports while it serves ``version``: a
        LoRA adapter carries the version in its name and leaves the base's label as it was."""
        if version == 0 or self.adapter is not None:
            return self._initial_labels.get(replica.url, "0")
        return str(version)

    def stamp_version(self, version: int) -> None:
        """Stamp ``version`` on later generations; every server now answers ``str(version)``
        (a weight sync passed it), attached ones too: their initial labels are gone (not with
        adapters: the base weights keep their label)."""
        if self.adapter is None:
            self._initial_labels.clear()
        super().stamp_version(version)

    # ------------------------------------------------------------------ generation
    async def _request(
        self, replica: Replica, prompt_ids: list[int], s: SamplingParams, seed: int, version: int
    ) -> Reply:
        if self._vocab_size is not None and not all(0 <= t < self._vocab_size for t in prompt_ids):
            bad = [t for t in prompt_ids if not 0 <= t < self._vocab_size]
            raise ValueError(
                f"prompt token ids {bad[:5]} are outside the model's vocabulary (size "
                f"{self._vocab_size}); SGLang would crash on them. Check the tokenizer"
            )
        if s.json_schema is not None:  # never ignored: the answer would not follow it
            raise ValueError("the sglang rollout engine of rlctl does not constrain decoding "
                             '(SamplingParams.json_schema); use backend = "vllm"')
        body = {
            "input_ids": prompt_ids,
            "sampling_params": {
                "max_new_tokens": s.max_new_tokens,
                "temperature": s.temperature,  # 0 = greedy (SGLang: top_k = 1, T = 1)
                "top_p": s.top_p,
                "top_k": s.top_k if s.top_k > 0 else -1,  # SGLang: -1 = off
                "ignore_eos": self.options.ignore_eos,
                "sampling_seed": seed,
            },
            "return_logprob": True,
        }
        if s.stop_token_ids:  # a tool loop ends the turn at a call (the token is kept)
            body["sampling_params"]["stop_token_ids"] = list(s.stop_token_ids)
        if self.adapter is not None:  # the LoRA adapter the sync loaded last, by name
            body["lora_path"] = self.adapter
        data = await self.post(replica, "/generate", body)
        try:
            meta = data["meta_info"]
            token_ids = [int(t) for t in data["output_ids"]]
            pairs = meta["output_token_logprobs"]  # [[log-prob, token id, text | None], ...]
            log_probs = [float(p[0]) for p in pairs]
            finish = meta["finish_reason"]["type"]
            served_version = str(meta["weight_version"])
        except (KeyError, IndexError, TypeError) as exc:
            raise ServerError(
                f"server {replica.name} answered /generate without output ids / log-probs / "
                f"weight version ({exc!r}); is it an SGLang server (>= 0.5)? answer: "
                f"{str(data)[:500]}"
            ) from exc
        if [int(p[1]) for p in pairs] != token_ids:
            raise ServerError(
                f"server {replica.name} returned log-probs for other tokens than output_ids"
            )
        if finish not in ("stop", "length", "abort"):
            raise ServerError(
                f"server {replica.name} ended a request with "
                f"finish_reason={meta['finish_reason']!r}"
            )
        expected = self.version_label(replica, version)
        if served_version != expected:
            raise ServerError(
                f"server {replica.name} generated with weight version {served_version!r}, but the "
                f"engine expects {expected!r} (version {version}): a weight update did not reach "
                "it or someone else updated it; these samples would be off-policy"
            )
        return Reply(token_ids, log_probs, finish)
