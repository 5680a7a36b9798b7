"""What every server-mode rollout engine (``vllm``, ``sglang``) shares: replicas, seeds, lifecycle.

A subclass says how to start one server (:meth:`ServerRolloutEngine.server_command`), how to
send it one request (:meth:`ServerRolloutEngine._request`) and how to abort its requests
(:attr:`ServerRolloutEngine.abort_path`). This base starts the
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
  :meth:`stamp_version` (every later generation carries the new version);
- :meth:`serve_adapter` (every later request asks for that LoRA adapter, loaded by the sync;
  ``spec.lora_adapters`` set: the servers start able to load adapters).

The rollout worker runs every sync inside :meth:`weight_update`: requests that start while
weights change wait for the new version (so the version a generation is stamped with is the
one that generated it), and with partial rollouts on (``[algorithm.staleness]
partial_rollout = "resume"``) the requests in flight are aborted first and resumed on the new
weights with the tokens they have (:mod:`rlctl.engines.rollout.server.partial`).

``model.path = "tiny"`` (or ``"tiny-chat"``) is materialised into a temporary directory first
(same seed as the actor, so version 0 is the actor's initial weights), because a server loads
checkpoints from disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import secrets
import shutil
import tempfile
from abc import abstractmethod
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from rlctl.engines.rollout.contract import (
    Generation,
    RolloutEngine,
    RolloutEngineSpec,
    SamplingParams,
)
from rlctl.engines.rollout.server.client import (
    HTTPLoop,
    Replica,
    checkpoint_names,
    fetch_json,
    post_json,
)
from rlctl.engines.rollout.server.memory import ServerMemory
from rlctl.engines.rollout.server.options import ServerOptions
from rlctl.engines.rollout.server.partial import InFlight, PartialResponse, Reply, attempt_seed
from rlctl.engines.rollout.server.process import (
    SERVED_MODEL_NAME,
    ServerCommand,
    ServerError,
    ServerProcess,
    on_devices,
    replica_devices,
    start_servers,
    wait_for_urls,
)

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

ABORT_RETRY_S = 0.5
"""A request sent just before an abort may reach its server after it: while requests are
still out, the abort is sent again this often (aborting twice is harmless)."""


class ServerRolloutEngine(ServerMemory, RolloutEngine):
    """Rollout through inference servers over HTTP (see the module docstring); colocated
    memory release is :class:`ServerMemory`'s."""

    engine_name: ClassVar[str]
    """Short name used in server names (``vllm[0]``), logs and temporary directories."""
    options_model: ClassVar[type[ServerOptions]]
    """The pydantic model of ``[engines.rollout.options]``."""
    health_path: ClassVar[str] = "/health"
    """Readiness probe of attached servers (started ones use their command's ``health_path``)."""
    served_name: ClassVar[str] = SERVED_MODEL_NAME
    """The model name servers this engine starts are told to serve."""
    abort_path: ClassVar[str]
    """POST path that aborts every request a server is running (answered with the tokens so
    far and finish reason ``abort``)."""
    abort_body: ClassVar[dict[str, Any]] = {}
    """Its JSON body."""

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
        self._adapter: str | None = None  # the LoRA adapter requests ask for (None: the base)
        # Partial rollouts (docs/streaming.md): abort at a weight update and resume on the new
        # weights; otherwise an aborted request is an error, as it always was.
        self._resume = spec.partial_rollout
        self._flight: InFlight | None = None  # made on the HTTP loop, used only there
        self.aborted_requests = 0
        """Requests of this engine its servers answered as aborted."""
        self.resumed_requests = 0
        """Aborted requests sent again with their tokens so far (partial rollouts)."""

    # ------------------------------------------------------------------ subclass interface
    @abstractmethod
    def server_command(self, index: int, model_dir: str) -> ServerCommand:
        """The command that starts replica ``index`` serving ``model_dir``."""

    takes_api_key: ClassVar[bool] = False
    """Whether the servers this engine starts can require an API key (:meth:`with_api_key`);
    the base's default: no."""

    def with_api_key(self, command: ServerCommand, key: str) -> ServerCommand:
        """``command`` made to require ``key`` on its requests (called when
        :attr:`takes_api_key`; the base leaves the command as it is)."""
        return command

    @abstractmethod
    def served_model(self, url: str) -> str:
        """The model name an attached server serves (ask with :attr:`attached_api_key`)."""

    @property
    def attached_api_key(self) -> str | None:
        """The key of attached servers: the variable ``api_key_env`` names (``None``: none)."""
        name = self.options.api_key_env
        if name is None:
            return None
        key = os.environ.get(name)
        if not key:
            raise ServerError(f"[engines.rollout.options] api_key_env = {name!r}, but that "
                              "environment variable is not set: export the servers' API key "
                              "in it")
        return key

    def check_model_dir(self, model_dir: Path) -> None:
        """Refuse, before a slow server start, a checkpoint the engine cannot serve (optional)."""

    @abstractmethod
    async def _warm_up(self, replica: Replica) -> None:
        """One tiny generation: a server can be healthy yet fail its first request."""

    @abstractmethod
    async def _request(
        self, replica: Replica, prompt_ids: list[int], s: SamplingParams, seed: int, version: int
    ) -> Reply:
        """One request to ``replica``, sent while the engine holds weight ``version``; an
        answer cut short by an abort is a :class:`Reply` with finish reason ``abort``."""

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
            self._flight = self._http.run(_new_in_flight())
            self._http.run(self._warm_up_all())
        except BaseException:
            self.close()
            raise

    def _start_replicas(self) -> None:
        if self.options.urls:
            urls = [u.rstrip("/") for u in self.options.urls]
            wait_for_urls(urls, self.options.startup_timeout_s, self.health_path)
            key = self.attached_api_key
            self._replicas = [Replica(url, self.served_model(url), api_key=key) for url in urls]
            return
        model_dir = self._model_dir()
        self._model_path = model_dir
        self._known_names = checkpoint_names(Path(model_dir))
        log_dir = Path(self.options.log_dir) if self.options.log_dir else self.workdir / "logs"
        # One fresh key per run, as the gateway does: another local user (or another run) on
        # this loopback port cannot generate with, or push weights into, this run's servers.
        key = secrets.token_urlsafe(32) if self.takes_api_key else None
        servers = []
        for i in range(self.spec.replicas):
            command = on_devices(self.server_command(i, model_dir),
                                 replica_devices(i, self.options.tensor_parallel_size))
            if key is not None:
                command = self.with_api_key(command, key)
            log = log_dir / f"{self.engine_name}-{i}-{command.port}.log"
            servers.append(ServerProcess(command, log))
        self._replicas = [Replica(s.url, self.served_name, s, api_key=key) for s in servers]
        start_servers(servers, self.options.startup_timeout_s)

    async def _warm_up_all(self) -> None:
        await asyncio.gather(*(self._warm_up(r) for r in self._replicas))

    def _model_dir(self) -> str:
        """A local checkpoint directory for the servers (``tiny`` is written out first)."""
        from rlctl.models.loading import BUILT_IN_MODELS

        model = self.spec.model
        if model.path not in BUILT_IN_MODELS:
            from rlctl.models.catalog import resolve_model_path

            path = resolve_model_path(model.path)  # a catalog name -> its installed directory
            self.check_model_dir(Path(path))
            return path
        from rlctl.models.loading import load_causal_lm, load_tokenizer

        out = self.workdir / "tiny-model"
        load_causal_lm(model, self.spec.model_seed).save_pretrained(out)
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

    async def _generate_one(
        self, prompt_ids: list[int], s: SamplingParams, seed: int
    ) -> Generation:
        """One response (on the HTTP loop): one request, or with partial rollouts one per
        weight version it spans, each stamped with the version it was sent under."""
        if not prompt_ids:
            raise ValueError("a prompt is empty: every request needs at least one token")
        flight = self._require_flight()
        response = PartialResponse(s.max_new_tokens)
        ids, sampling = prompt_ids, s
        while True:
            await flight.wait_open()  # a weight update holds new and resumed requests
            replica = self._next_replica()
            version = self._version
            flight.enter(replica.name)
            try:
                reply = await self._request(replica, ids, sampling,
                                            attempt_seed(seed, response.resumes), version)
            finally:
                flight.leave(replica.name)
            response.add(version, reply)
            self.aborted_requests += reply.finish_reason == "abort"
            if response.done:
                return response.generation()
            if not self._resume:
                raise ServerError(
                    f"server {replica.name} aborted a request (finish reason 'abort') and "
                    "partial rollouts are off ([algorithm.staleness] partial_rollout = "
                    '"finish"): something else aborts requests on it, e.g. a weight sync '
                    'with pause_mode = "abort"')
            ids, sampling = response.next_request(prompt_ids, s)
            self.resumed_requests += 1

    @property
    def requests_in_flight(self) -> int:
        """Generation requests sent and not answered yet (a snapshot)."""
        return self._require_flight().count

    def _require_flight(self) -> InFlight:
        if self._flight is None:
            raise RuntimeError(f"{type(self).__name__} used before load(): call load() first")
        return self._flight

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

    @contextlib.contextmanager
    def weight_update(self, *, timeout_s: float) -> Iterator[None]:
        """Run a weight sync inside this: requests that start meanwhile wait for the new
        weights; with partial rollouts on, every request in flight is aborted first and each
        must come back (with its tokens so far) within ``timeout_s``, or the update fails
        naming the servers that did not answer. Aborted requests resume once the sync has
        stamped the new version."""
        flight = self._require_flight()
        http = self.require_http()
        http.run(_call(flight.close))
        try:
            if self._resume:
                http.run(self._abort_in_flight(flight, timeout_s))
            yield
        finally:
            with contextlib.suppress(RuntimeError):  # a closed engine has nothing to let in
                http.run(_call(flight.open))

    async def _abort_in_flight(self, flight: InFlight, timeout_s: float) -> None:
        """Abort every request in flight and wait until each has come back. (A request the
        engine sent just before may reach its server after the abort: the abort is repeated
        every ``ABORT_RETRY_S`` while requests are out.)"""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while flight.count:
            left = deadline - loop.time()
            busy = [r for r in self._replicas if flight.by_server.get(r.name)]
            if left <= 0:
                late = ", ".join(f"{r.name} ({flight.by_server[r.name]})" for r in busy)
                raise ServerError(
                    f"requests in flight did not come back within {timeout_s:g} s of being "
                    f"aborted at a weight update: {late}; the server does not acknowledge "
                    "aborts (the bound is half of schedule.phase_timeout_s)"
                    + "".join(r.log_suffix() for r in busy))
            try:
                await asyncio.gather(*(
                    self.post(r, self.abort_path, self.abort_body, timeout_s=left, limit=False)
                    for r in busy))
            except ServerError as exc:
                raise ServerError(
                    f"aborting the requests in flight at a weight update failed: {exc}"
                ) from exc
            await flight.drained(min(ABORT_RETRY_S, deadline - loop.time()))

    @property
    def adapter(self) -> str | None:
        """The name of the LoRA adapter every request asks for (``None``: the base model)."""
        return self._adapter

    def serve_adapter(self, name: str | None) -> None:
        """Make every later request ask for adapter ``name``, which every server has loaded
        (a weight sync calls it, inside :meth:`weight_update`)."""
        self._adapter = name

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
        timeout_s: float | None = None, limit: bool = True,
    ) -> Any:
        """POST JSON to one server and return its JSON answer (on the HTTP loop); every failure
        is a ``ServerError`` naming the server and, if this engine started it, quoting its log.
        ``limit = False``: not counted in ``max_concurrent_requests`` (an abort must get
        through while the requests it aborts hold every slot)."""
        return await post_json(self.require_http(), replica, path, body, timeout_s=timeout_s,
                               limit=limit)

    async def get(self, replica: Replica, path: str, *, timeout_s: float | None = None) -> Any:
        """GET JSON from one server (on the HTTP loop); failures as for :meth:`post`."""
        return await fetch_json(self.require_http(), replica, path, timeout_s=timeout_s)


async def _new_in_flight() -> InFlight:
    return InFlight()


async def _call(fn: Callable[[], None]) -> None:
    """Run ``fn`` on the HTTP loop (asyncio events are not thread-safe)."""
    fn()
