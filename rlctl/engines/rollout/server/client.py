"""The HTTP side of server-mode rollout engines: replicas, one event loop, errors that name servers.

All HTTP traffic of an engine runs on one asyncio loop in a daemon thread that owns one
``aiohttp`` session (:class:`HTTPLoop`), so ``await engine.generate(...)`` works from any
caller's event loop (the rollout worker makes a new one per step) and blocking helpers from plain
code. :func:`post_json` and :func:`fetch_json` send every request: every failure becomes a
:class:`~rlctl.engines.rollout.server.process.ServerError` that names the server and, when this
process
started it, quotes its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from rlctl.engines.rollout.server.process import ServerError, ServerProcess, log_excerpt

T = TypeVar("T")


@dataclass
class Replica:
    """One server: where it answers, the model name it serves, its process when we started it."""

    url: str
    model: str
    process: ServerProcess | None = None
    api_key: str | None = None
    """Sent as ``Authorization: Bearer`` on every request (``None``: the server has none)."""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def name(self) -> str:
        return self.process.name if self.process is not None else self.url

    def log_suffix(self) -> str:
        return "" if self.process is None else "\n" + log_excerpt(self.process.log_path)

    def dead_suffix(self) -> str:
        """Why a request failed at the transport level: a dead process explains it best."""
        if self.process is None or self.process.popen is None:
            return ""
        # A killed server's sockets close a moment before it can be reaped: give it a second,
        # so the error says "died with exit code -9" rather than "still running".
        try:
            code = self.process.popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        state = "it is still running" if code is None else f"it died with exit code {code}"
        return f" ({state}){self.log_suffix()}"


class HTTPLoop:
    """An asyncio event loop running in a daemon thread, owning one HTTP session."""

    def __init__(self, timeout_s: float, max_in_flight: int, name: str = "rlctl-http") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()
        self.session: aiohttp.ClientSession = self.run(self._open(timeout_s, max_in_flight))

    async def _open(self, timeout_s: float, max_in_flight: int) -> aiohttp.ClientSession:
        self.semaphore = asyncio.Semaphore(max_in_flight)
        # limit=0: the semaphore bounds concurrency; aiohttp's own pool limit (100) would
        # queue requests silently behind it. Idle connections are dropped after 2 s, before
        # uvicorn's 5 s keep-alive timeout closes them under us.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        # Retries go through a session that never reuses a connection: the pool may hold more
        # than one connection the server has just closed, and a retry must not pick another.
        self.fresh_session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=True), timeout=timeout
        )
        return aiohttp.ClientSession(connector=connector, timeout=timeout)

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
            self.run(self.fresh_session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


async def post_json(
    http: HTTPLoop,
    replica: Replica,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    timeout_s: float | None = None,
    limit: bool = True,
) -> Any:
    """POST to one server (on ``http``'s loop) and return its JSON answer (a plain-text answer
    as it is); every failure names the server and its log. ``limit = False``: outside the
    ``max_in_flight`` slots (a control request)."""
    url = replica.url + path
    timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s is not None else None
    slot = http.semaphore if limit else contextlib.nullcontext()
    attempts = 3
    for attempt in range(1, attempts + 1):
        session = http.session if attempt == 1 else http.fresh_session
        try:
            async with slot, session.post(url, json=body, timeout=timeout,
                                          headers=replica.headers) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise ServerError(
                        f"server {replica.name} answered POST {path} with HTTP {resp.status}: "
                        f"{text[:1000]}{replica.log_suffix()}"
                    )
            break
        except aiohttp.ClientConnectionError as exc:
            # The server closed a pooled keep-alive connection just as we sent on it (idle
            # timeout, or uvicorn dropping the connection after a 500): the request was
            # never read. Send it again on fresh connections (measured: one 150-step vLLM run
            # lost a sample to two stale pooled connections in a row); callers only send
            # requests that are safe to repeat (generations carry their seed, the others are
            # idempotent).
            alive = replica.process is None or replica.process.alive()
            if attempt < attempts and alive:
                continue
            raise ServerError(
                f"POST {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
                f"{replica.dead_suffix()}"
            ) from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ServerError(
                f"POST {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
                f"{replica.dead_suffix()}"
            ) from exc
    try:
        return json.loads(text) if text else None
    except ValueError:  # a plain-text answer (vLLM's LoRA routes answer "Success: ...")
        return text


async def fetch_json(
    http: HTTPLoop, replica: Replica, path: str, *, timeout_s: float | None = None
) -> Any:
    """GET from one server (on ``http``'s loop); every failure names the server."""
    url = replica.url + path
    timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s is not None else None
    try:
        async with http.semaphore, http.session.get(url, timeout=timeout,
                                                    headers=replica.headers) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise ServerError(
                    f"server {replica.name} answered GET {path} with HTTP {resp.status}: "
                    f"{text[:1000]}{replica.log_suffix()}"
                )
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ServerError(
            f"GET {url} to server {replica.name} failed: {type(exc).__name__}: {exc}"
            f"{replica.dead_suffix()}"
        ) from exc
    return json.loads(text) if text else None


def checkpoint_names(model_dir: Path) -> set[str] | None:
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


def get_json(url: str, timeout_s: float = 10.0, *, api_key: str | None = None) -> Any:
    """A blocking GET for setup-time questions (served model, server info); errors name the URL."""
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except Exception as exc:
        raise ServerError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
