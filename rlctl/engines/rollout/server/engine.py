"""What every server-mode rollout engine (``vllm``, ``sglang``) shares: replicas, seeds, lifecycle.

A subclass says how to start one server (:meth:`ServerRolloutEngine.server_command`) and how to
ask it for one generation (:meth:`ServerRolloutEngine._generate_one`). This base starts the
servers (or attaches to ``urls``), warms each one up, sends requests round-robin over the
replicas from one HTTP loop (:class:`~rlctl.engines.rollout.server.client.HTTPLoop`), derives one
seed per request (engine seed and a request counter, so a sequence of calls is reproducible
however the server batches them), and stops everything it started on :meth:`close`.

Weights are not the engine's business: a weight sync (``vllm``, ``sglang``) updates the servers
through the engine's public surface, and nothing else of it:

- :attr:`replicas` (URL, served model name, process), :attr:`workdir` (staging files);
- :meth:`post` / :meth:`get` (one request to one server, errors naming it and quoting its
  log), :meth:`on_replicas` (one call per replica at once, all awaited), :meth:`run` /
  :meth:`schedule` (a coroutine on the engine's HTTP loop, blocking or not);
- :meth:`check_names` (refuse names the served checkpoint lacks, before anything is sent) and
  :meth:`stamp_version` (every later generation carries the new version).

``model.path = "tiny"`` is materialised into a temporary directory first (same seed as the
actor, so version 0 is the actor's initial weights), because a server loads checkpoints from disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from rlctl.engines.rollout.contract import Generation, RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.server.client import (
    HTTPLoop,
    Replica,
    checkpoint_names,
    fetch_json,
    post_json,
)
from rlctl.engines.rollout.server.options import ServerOptions
from rlctl.engines.rollout.server.process import (
    SERVED_MODEL_NAME,
    ServerCommand,
    ServerProcess,
    start_servers,
    wait_for_urls,
)

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


class ServerRolloutEngine(ABC):
    """Rollout through inference servers over HTTP (see the module docstring)."""

    engine_name: ClassVar[str]
    """Short name used in server names (``vllm[0]``), logs and temporary directories."""
    options_model: ClassVar[type[ServerOptions]]
    """The pydantic model of ``[engines.rollout.options]``."""
    health_path: ClassVar[str] = "/health"
    """Readiness probe of attached servers (started ones use their command's ``health_path``)."""
    served_name: ClassVar[str] = SERVED_MODEL_NAME
    """The model name servers this engine starts are told to serve."""

    def __init__(self, spec: RolloutEngineSpec) -> None:
        self.spec = spec
        self.options: Any = spec.options_as(self.options_model)
        self._version = 0
        self._calls = 0  # requests issued so far: derives per-request seeds
        self._turn = 0  # round-robin position (only touched on the HTTP loop's thread)
        self._replicas: list[Replica] = []
        self._http: HTTPLoop | None = None
        self._workdir: Path | None = None
        self._model_path: str | None = None
        self._known_names: set[str] | None = None  # parameter names of the served checkpoint

    # ------------------------------------------------------------------ subclass interface
    @abstractmethod
    def server_command(self, index: int, model_dir: str) -> ServerCommand:
        """The command that starts replica ``index`` serving ``model_dir``."""

    @abstractmethod
    def served_model(self, url: str) -> str:
        """The model name an attached server serves."""

    def check_model_dir(self, model_dir: Path) -> None:
        """Refuse, before a slow server start, a checkpoint the engine cannot serve (optional)."""

    @abstractmethod
    async def _warm_up(self, replica: Replica) -> None:
        """One tiny generation: a server can be healthy yet fail its first request."""

    @abstractmethod
    async def _generate_one(
        self, prompt_ids: list[int], s: SamplingParams, seed: int
    ) -> Generation:
        """One request on the next replica -> a :class:`Generation` stamped with the version."""

    # ------------------------------------------------------------------ setup
    def load(self) -> None:
        """Start (or attach to) the servers and open the HTTP client."""
        if self._http is not None:
            raise RuntimeError(f"{type(self).__name__}.load() was already called")
        self._workdir = Path(tempfile.mkdtemp(prefix=f"rlctl-{self.engine_name}-"))
        try:
            self._start_replicas()
            self._http = HTTPLoop(
                self.options.request_timeout_s, self.options.max_concurrent_requests,
                name=f"rlctl-{self.engine_name}-http",
            )
            self._http.run(self._warm_up_all())
        except BaseException:
            self.close()
            raise

    def _start_replicas(self) -> None:
        if self.options.urls:
            urls = [u.rstrip("/") for u in self.options.urls]
            wait_for_urls(urls, self.options.startup_timeout_s, self.health_path)
            self._replicas = [Replica(url, self.served_model(url)) for url in urls]
            return
        model_dir = self._model_dir()
        self._model_path = model_dir
        self._known_names = checkpoint_names(Path(model_dir))
        log_dir = Path(self.options.log_dir) if self.options.log_dir else self.workdir / "logs"
        servers = []
        for i in range(self.spec.recipe.engines.rollout.replicas):
            command = self.server_command(i, model_dir)
            log = log_dir / f"{self.engine_name}-{i}-{command.port}.log"
            servers.append(ServerProcess(command, log))
        self._replicas = [Replica(s.url, self.served_name, s) for s in servers]
        start_servers(servers, self.options.startup_timeout_s)

    async def _warm_up_all(self) -> None:
        await asyncio.gather(*(self._warm_up(r) for r in self._replicas))

    def _model_dir(self) -> str:
        """A local checkpoint directory for the servers (``tiny`` is written out first)."""
        from rlctl.models.loading import TINY

        model = self.spec.recipe.model
        if model.path != TINY:
            self.check_model_dir(Path(model.path))
            return model.path
        from rlctl.models.loading import load_causal_lm, load_tokenizer

        out = self.workdir / "tiny-model"
        load_causal_lm(model, self.spec.recipe.run.seed).save_pretrained(out)
        load_tokenizer(model).save_pretrained(out)
        self.check_model_dir(out)
        return str(out)

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError(f"{type(self).__name__} used before load(): call load() first")
        return self._workdir

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self._replicas]

    @property
    def replicas(self) -> list[Replica]:
        return list(self._replicas)

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
            self._workdir = None

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
        http = self.require_http()
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
        http = self.require_http()
        sampling = SamplingParams(max_new_tokens, temperature, top_p, top_k)
        seeds = [self._next_seed() if seed is None else seed + i for i in range(len(prompts))]

        async def run_all() -> list[Generation]:
            return list(
                await asyncio.gather(
                    *(
                        self._generate_one(list(p), sampling, s)
                        for p, s in zip(prompts, seeds, strict=True)
                    )
                )
            )

        return http.run(run_all())

    def _next_seed(self) -> int:
        seed = (self.spec.seed * 1_000_003 + self._calls) % (2**63)
        self._calls += 1
        return seed

    def _next_replica(self) -> Replica:
        """Round-robin (call on the HTTP loop's thread only)."""
        replica = self._replicas[self._turn % len(self._replicas)]
        self._turn += 1
        return replica

    # ------------------------------------------------------------------ for weight syncs
    def check_names(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Refuse names the served checkpoint lacks: servers raise on unknown parameter names
        (vLLM's worker then dies, measured), so catch them here, before anything is sent."""
        if self._known_names is None:  # attached servers: their checkpoint is not ours to read
            return
        # A tied LM head is absent from the checkpoint but present in a full state dict;
        # servers skip it when loading.
        unknown = sorted(set(state_dict) - self._known_names - {"lm_head.weight"})
        if unknown:
            raise ValueError(
                f"weight update to version {version} has {len(unknown)} name(s) the served "
                f"checkpoint does not have, e.g. {unknown[:3]}; {self.engine_name} would crash on "
                "them. Export the actor's full state dict with Hugging Face parameter names"
            )

    def stamp_version(self, version: int) -> None:
        """Stamp ``version`` on every later generation: a weight sync calls it once every
        server runs the weights of ``version``."""
        self._version = int(version)

    def on_replicas(self, call: Callable[[Replica], Coroutine[Any, Any, T]]) -> list[T]:
        """Run ``call(replica)`` on every replica at once; wait for all, then raise the first
        error (blocking). Waiting for all, not failing fast, keeps the servers in step: the
        next request of a sync never reaches a server still busy with the previous one."""

        async def every() -> list[Any]:
            return list(await asyncio.gather(*(call(r) for r in self._replicas),
                                             return_exceptions=True))

        results = self.run(every())
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        return results

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine's HTTP loop and block until it is done."""
        return self.require_http().run(coro)

    def schedule(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the engine's HTTP loop without waiting (this thread goes on, e.g.
        to join a process group the servers are joining through that request)."""
        return asyncio.run_coroutine_threadsafe(coro, self.require_http().loop)

    # ------------------------------------------------------------------ resumable state
    def state_dict(self) -> dict[str, int]:
        """Request counter (seeds) and weight version: with it a resumed run draws the same
        samples."""
        return {"calls": self._calls, "weight_version": self._version}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._calls = int(state["calls"])

    # ------------------------------------------------------------------ HTTP
    def require_http(self) -> HTTPLoop:
        if self._http is None:
            raise RuntimeError(f"{type(self).__name__} used before load(): call load() first")
        return self._http

    async def post(
        self, replica: Replica, path: str, body: dict[str, Any] | None = None, *,
        timeout_s: float | None = None,
    ) -> Any:
        """POST JSON to one server and return its JSON answer (on the HTTP loop); every failure
        is a ``ServerError`` naming the server and, if this engine started it, quoting its log."""
        return await post_json(self.require_http(), replica, path, body, timeout_s=timeout_s)

    async def get(self, replica: Replica, path: str, *, timeout_s: float | None = None) -> Any:
        """GET JSON from one server (on the HTTP loop); failures as for :meth:`post`."""
        return await fetch_json(self.require_http(), replica, path, timeout_s=timeout_s)
