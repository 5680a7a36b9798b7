"""The ``vllm`` rollout engine: vLLM OpenAI-compatible servers, token-in / token-out over HTTP.

Servers: ``replicas`` servers started as subprocesses from the interpreter in
``[engines.rollout.options] python`` (vLLM's own environment, see
``scripts/build_engine_envs.sh``), or the servers listed in ``urls``. ``model.path = "tiny"``
is materialised into a temporary directory first (same seed as the actor, so version 0 is the
actor's initial weights), because a server can only load a checkpoint from disk.

Requests: ``POST /v1/completions`` with ``prompt`` as token ids, ``return_token_ids`` and
``logprobs=1``; the server runs with ``--logprobs-mode processed_logprobs`` so each log-prob is
the one of the distribution the token was drawn from (after temperature / top-k / top-p), like
the ``hf`` engine. Every request carries its own seed (engine seed and a request counter), so a
sequence of calls is reproducible whatever the server batches together.

Concurrency: all HTTP traffic runs on one event loop in a background thread with one
``aiohttp`` session, so ``await generate(...)`` works from any caller's event loop (the rollout
worker makes a new one per step) and ``generate_batch`` from plain code. Requests go round-robin
over the replicas, at most ``max_concurrent_requests`` at once.

Weight sync (first path): ``update_weights`` writes the state dict to one safetensors file in a
staging directory and asks every server to ``/collective_rpc`` ``reload_weights`` from it (vLLM
CPU repacks its linear weights after loading, so a plain ``load_weights`` would fail; the
worker's ``reload_weights`` repacks). Requests in flight finish on the old weights first
(``/pause?mode=wait``), the prefix cache is reset (its KV was computed by the old weights), then
``/resume``. The engine stamps ``version`` on every later generation. The staging file must be
readable by the servers: attached servers (``urls``) must share this machine's filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import aiohttp

from rlctl.engines.rollout_engine import Generation, RolloutEngineSpec, SamplingParams
from rlctl.engines.vllm_options import VLLMOptions
from rlctl.engines.vllm_server import (
    SERVED_MODEL_NAME,
    ServerError,
    ServerProcess,
    log_excerpt,
    start_servers,
    vllm_server_command,
    wait_for_urls,
)

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

# Head sizes vLLM 0.32's CPU attention backend supports (``CPUAttentionBackend``); any other
# size starts a healthy server whose engine dies at the first request.
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


@dataclass
class _Replica:
    """One server: where it answers, the model name it serves, its process when we started it."""

    url: str
    model: str
    process: ServerProcess | None = None

    @property
    def name(self) -> str:
        return self.process.name if self.process is not None else self.url


class _LoopThread:
    """An asyncio event loop running in a daemon thread, owning one HTTP session."""

    def __init__(self, timeout_s: float, max_in_flight: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rlctl-vllm-http", daemon=True)
        self.thread.start()
        self.session: aiohttp.ClientSession = self.run(self._open(timeout_s, max_in_flight))

    async def _open(self, timeout_s: float, max_in_flight: int) -> aiohttp.ClientSession:
        self.semaphore = asyncio.Semaphore(max_in_flight)
        # limit=0: the semaphore bounds concurrency; aiohttp's own pool limit (100) would
        # queue requests silently behind it. Idle connections are dropped after 2 s, before
        # uvicorn's 5 s keep-alive timeout closes them under us.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
        return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s))

    def submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Schedule ``coro`` on the loop; the result is awaitable from the caller's loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and block until it is done (not from the loop's thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):  # closing must not mask the error that led here
            self.run(self.session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class VLLMRolloutEngine:
    """Rollout through vLLM servers (see the module docstring)."""

    def __init__(self, spec: RolloutEngineSpec) -> None:
        self.spec = spec
        self.options = VLLMOptions.model_validate(spec.recipe.engines.rollout.options)
        self._version = 0
        self._calls = 0  # requests issued so far: derives per-request seeds
        self._turn = 0  # round-robin position (only touched on the HTTP loop's thread)
        self._replicas: list[_Replica] = []
        self._http: _LoopThread | None = None
        self._workdir: Path | None = None
        self._weights_dir: Path | None = None
        self._known_names: set[str] | None = None  # parameter names of the served checkpoint

    # ------------------------------------------------------------------ setup
    def load(self) -> None:
        """Start (or attach to) the servers and open the HTTP client."""
        if self._http is not None:
            raise RuntimeError("VLLMRolloutEngine.load() was already called")
        self._workdir = Path(tempfile.mkdtemp(prefix="rlctl-vllm-"))
        try:
            self._start_replicas()
            self._http = _LoopThread(self.options.request_timeout_s, self.options.max_concurrent_requests)
            # One token per replica: a server can be healthy yet fail its first generation.
            self._http.run(self._warm_up())
        except BaseException:
            self.close()
            raise

    def _start_replicas(self) -> None:
        assert self._workdir is not None
        if self.options.urls:
            urls = [u.rstrip("/") for u in self.options.urls]
            wait_for_urls(urls, self.options.startup_timeout_s)
            self._replicas = [_Replica(url, _served_model(url)) for url in urls]
            return
        recipe = self.spec.recipe
        model_dir = self._model_dir()
        self._known_names = _checkpoint_names(Path(model_dir))
        log_dir = Path(self.options.log_dir) if self.options.log_dir else self._workdir / "logs"
        servers = []
        for i in range(recipe.engines.rollout.replicas):
            command = vllm_server_command(
                f"vllm[{i}]", self.options, model=model_dir, dtype=recipe.model.dtype,
                seed=self.spec.seed + i, device=self.spec.device,
            )
            servers.append(ServerProcess(command, log_dir / f"vllm-{i}-{command.port}.log"))
        self._replicas = [_Replica(s.url, SERVED_MODEL_NAME, s) for s in servers]
        start_servers(servers, self.options.startup_timeout_s)

    async def _warm_up(self) -> None:
        async def one(replica: _Replica) -> None:
            body = {"model": replica.model, "prompt": [0], "max_tokens": 1, "temperature": 0}
            await self._post(replica, "/v1/completions", body)

        await asyncio.gather(*(one(r) for r in self._replicas))

    def _model_dir(self) -> str:
        """A local checkpoint directory for the servers (``tiny`` is written out first)."""
        from rlctl.models.loading import TINY

        model = self.spec.recipe.model
        if model.path != TINY:
            self._check_head_dim(Path(model.path) / "config.json")
            return model.path
        from rlctl.models.loading import load_causal_lm, load_tokenizer

        assert self._workdir is not None
        out = self._workdir / "tiny-model"
        load_causal_lm(model, self.spec.recipe.run.seed).save_pretrained(out)
        load_tokenizer(model).save_pretrained(out)
        self._check_head_dim(out / "config.json")
        return str(out)

    def _check_head_dim(self, config_path: Path) -> None:
        """Refuse, before a 30 s server start, a model the CPU attention backend cannot run."""
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

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self._replicas]

    @property
    def servers(self) -> list[ServerProcess]:
        """The server processes this engine started (empty in attach mode)."""
        return [r.process for r in self._replicas if r.process is not None]

    def close(self) -> None:
        """Stop the servers this engine started, close the client, remove temporary files."""
        if self._http is not None:
            self._http.close()
            self._http = None
        for replica in self._replicas:
            if replica.process is not None:
                replica.process.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = self._weights_dir = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ generation
    @property
    def weight_version(self) -> int:
        return self._version

    async def generate(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Generation:
        """Sample one response for ``prompt_ids`` (callable from any event loop)."""
        http = self._require_http()
        return await http.submit(self._generate_one(list(prompt_ids), sampling, self._next_seed()))

    def generate_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
    ) -> list[Generation]:
        """Sample one response per prompt, all requests concurrently; blocking."""
        http = self._require_http()
        sampling = SamplingParams(max_new_tokens, temperature, top_p, top_k)
        seeds = [self._next_seed() if seed is None else seed + i for i in range(len(prompts))]

        async def run_all() -> list[Generation]:
            return list(await asyncio.gather(
                *(self._generate_one(list(p), sampling, s) for p, s in zip(prompts, seeds, strict=True))
            ))

        return http.run(run_all())

    def _next_seed(self) -> int:
        seed = (self.spec.seed * 1_000_003 + self._calls) % (2**63)
        self._calls += 1
        return seed

    async def _generate_one(self, prompt_ids: list[int], s: SamplingParams, seed: int) -> Generation:
        if not prompt_ids:
            raise ValueError("a prompt is empty: every request needs at least one token")
        replica = self._replicas[self._turn % len(self._replicas)]
        self._turn += 1
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
            "seed": seed,
        }
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
        http = self._require_http()
        self._check_names(state_dict, version)
        path = self._stage_weights(state_dict)
        started = time.monotonic()

        async def update(replica: _Replica) -> None:
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

        async def update_all() -> None:
            await asyncio.gather(*(update(r) for r in self._replicas))

        try:
            http.run(update_all())
        except ServerError as exc:
            raise ServerError(f"weight update to version {version} failed: {exc}") from exc
        self._version = int(version)
        self.last_update_s = time.monotonic() - started

    def _check_names(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Refuse names the served checkpoint lacks: vLLM's worker raises on them and the
        whole server dies (measured), so catch them here, before anything is sent."""
        if self._known_names is None:  # attached servers: their checkpoint is not ours to read
            return
        # A tied LM head is absent from the checkpoint but present in a full state dict;
        # vLLM skips it when loading.
        unknown = sorted(set(state_dict) - self._known_names - {"lm_head.weight"})
        if unknown:
            raise ValueError(
                f"weight update to version {version} has {len(unknown)} name(s) the served "
                f"checkpoint does not have, e.g. {unknown[:3]}; vLLM would crash on them. "
                "Export the actor's full state dict with Hugging Face parameter names"
            )

    def _stage_weights(self, state_dict: Mapping[str, torch.Tensor]) -> Path:
        """Write ``state_dict`` to ``<staging>/model.safetensors`` atomically; return the directory."""
        from safetensors.torch import save_file

        if not state_dict:
            raise ValueError(
                "vllm weight update got an empty state dict: with several training ranks only "
                "rank 0 holds the full weights; sync from rank 0"
            )
        if self._weights_dir is None:
            assert self._workdir is not None
            self._weights_dir = self._workdir / "weights"
            self._weights_dir.mkdir()
        tensors: dict[str, torch.Tensor] = {}
        seen: set[int] = set()
        for name, tensor in state_dict.items():
            t = tensor.detach().to("cpu").contiguous()
            # Tied weights share storage, which safetensors refuses: copy the second one.
            if t.data_ptr() in seen:
                t = t.clone()
            seen.add(t.data_ptr())
            tensors[name] = t
        tmp = self._weights_dir / ".model.safetensors.tmp"
        save_file(tensors, str(tmp))
        # One fixed path: reload_weights repoints the server's model path at this directory.
        os.replace(tmp, self._weights_dir / "model.safetensors")
        return self._weights_dir

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, int]:
        """Request counter (seeds) and weight version: with it a resumed run draws the same samples."""
        return {"calls": self._calls, "weight_version": self._version}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._calls = int(state["calls"])

    # ------------------------------------------------------------------ HTTP
    def _require_http(self) -> _LoopThread:
        if self._http is None:
            raise RuntimeError("VLLMRolloutEngine used before load(): call load() first")
        return self._http

    async def _post(self, replica: _Replica, path: str, body: dict[str, Any] | None) -> Any:
        """POST to one server; every failure names the server and, if we started it, its log."""
        http = self._require_http()
        url = replica.url + path
        for attempt in (1, 2):
            try:
                async with http.semaphore, http.session.post(url, json=body) as resp:
                    text = await resp.text()
                    if resp.status != 200:
                        raise ServerError(
                            f"server {replica.name} answered POST {path} with HTTP {resp.status}: "
                            f"{text[:1000]}{_log_suffix(replica)}"
                        )
                break
            except aiohttp.ClientConnectionError as exc:
                # The server closed a pooled keep-alive connection just as we sent on it (idle
                # timeout, or uvicorn dropping the connection after a 500): the request was
                # never read. Send it once more on a fresh connection; every request here is
                # safe to repeat (generations carry their seed, the others are idempotent).
                alive = replica.process is None or replica.process.alive()
                if attempt == 1 and alive:
                    continue
                raise ServerError(
                    f"POST {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
                    f"{_dead_suffix(replica)}"
                ) from exc
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise ServerError(
                    f"POST {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
                    f"{_dead_suffix(replica)}"
                ) from exc
        return json.loads(text) if text else None


def _checkpoint_names(model_dir: Path) -> set[str] | None:
    """Tensor names in a checkpoint's safetensors files (``None`` when it has none)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    names: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            names.update(f.keys())
    return names


def _served_model(url: str) -> str:
    """The model name an attached server serves (``GET /v1/models``)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
            models = json.loads(resp.read())["data"]
    except Exception as exc:
        raise ServerError(f"server {url}: GET /v1/models failed ({exc}); is it a vLLM server?") from exc
    if not models:
        raise ServerError(f"server {url} serves no model (GET /v1/models is empty)")
    return str(models[0]["id"])


def _log_suffix(replica: _Replica) -> str:
    return "" if replica.process is None else "\n" + log_excerpt(replica.process.log_path)


def _dead_suffix(replica: _Replica) -> str:
    """Why a request failed at the transport level: a dead process explains it best."""
    if replica.process is None:
        return ""
    code = replica.process.popen.poll() if replica.process.popen is not None else None
    state = "it is still running" if code is None else f"it died with exit code {code}"
    return f" ({state}){_log_suffix(replica)}"
