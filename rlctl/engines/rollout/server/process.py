"""Start (or attach to) inference servers as subprocesses: launch, wait for health, always reap.

:class:`ServerProcess` is engine-agnostic: it runs a command with its output in a log file,
polls an HTTP health endpoint until it answers 200 or the timeout passes, notices when the
process dies, and kills the whole process group on :meth:`ServerProcess.stop` (vLLM and SGLang
spawn engine-core / scheduler processes of their own; killing only the parent would orphan
them). Every error names the server and carries the tail of its log, because that is where the
real cause (a missing package, an out-of-memory, a bad flag) is written.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Self

SERVED_MODEL_NAME = "rlctl-policy"
"""The name requests use in their ``model`` field (``--served-model-name``)."""

# Variables of the caller's Python environment that would leak its packages into an engine
# that runs from a different interpreter.
PYTHON_ENV_VARS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


class ServerError(RuntimeError):
    """A server did not start, died, or answered an error; the message names it and its log."""


@dataclass(frozen=True)
class ServerCommand:
    """How to start one server process."""

    name: str
    """Human-readable name used in every error (e.g. ``vllm[0]``)."""
    argv: list[str]
    """Full command line; ``argv[0]`` is the interpreter or executable."""
    port: int
    """Port the server listens on, on 127.0.0.1."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set on top of the inherited environment."""
    unset_env: tuple[str, ...] = ()
    """Variables removed from the inherited environment."""
    health_path: str = "/health"
    """GET path that answers 200 once the server can take requests."""
    python: bool = True
    """``argv[0]`` is a Python interpreter: it runs the orphan guard before the command."""


def replica_devices(replica: int, tensor_parallel_size: int) -> str | None:
    """The accelerators server ``replica`` of this worker sees: its ``tensor_parallel_size``
    slice of the devices the worker was given (``CUDA_VISIBLE_DEVICES``, set from its
    placement seat: :meth:`rlctl.trainer.worker.contract.Worker.take_seat`); ``None``
    (inherit) when the worker was given no devices, or too few for every replica."""
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    mine = visible[replica * tensor_parallel_size:(replica + 1) * tensor_parallel_size]
    return ",".join(mine) if len(mine) == tensor_parallel_size else None


def on_devices(command: ServerCommand, devices: str | None) -> ServerCommand:
    """``command`` started seeing only ``devices`` (unless its own env already chose)."""
    if devices is None or "CUDA_VISIBLE_DEVICES" in command.env:
        return command
    return replace(command, env={**command.env, "CUDA_VISIBLE_DEVICES": devices})


# Run by the server's own interpreter, which then execs the real command: the kernel sends
# SIGTERM to the server when the process that started it dies, even by SIGKILL, so a killed
# trainer does not leave servers (and their GBs of memory) behind. PR_SET_PDEATHSIG survives
# exec; it is Linux-only, elsewhere the guard just execs.
_ORPHAN_GUARD = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('rlctl: the process that started this server has exited')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)

# The death signal fires when the *thread* that forked the server ends, not the process: spawn
# from one thread that lives as long as the interpreter, whatever thread calls start().
_SPAWNER = concurrent.futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="rlctl-server-spawner"
)


def read_log_tail(path: Path, lines: int = 40, max_bytes: int = 64_000) -> str:
    """The last ``lines`` lines of a log file (reads at most ``max_bytes`` from its end)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return "(no log file)"
    text = data.decode("utf-8", errors="replace").rstrip()
    return "\n".join(text.splitlines()[-lines:]) if text else "(log is empty)"


_ERROR_LINE = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*(Error|Exception): ")


def error_lines(text: str, limit: int = 5) -> list[str]:
    """Distinct lines that look like a raised exception (``FooError: why``), first ones first.

    vLLM prints long tracebacks from several processes: the line naming the root cause is
    often far above the last lines of the log, so it is quoted separately.
    """
    seen: list[str] = []
    for line in text.splitlines():
        match = _ERROR_LINE.search(line)
        if match is None or " WARNING " in line:
            continue
        cause = line[match.start():].strip()
        if cause not in seen:
            seen.append(cause)
        if len(seen) == limit:
            break
    return seen


def log_excerpt(path: Path, lines: int = 40) -> str:
    """The error lines of a log (root cause first) followed by its last ``lines`` lines."""
    tail = read_log_tail(path, lines)
    causes = error_lines(read_log_tail(path, lines=100_000, max_bytes=2_000_000))
    head = "".join(f"  {c}\n" for c in causes)
    head = f"--- errors in {path} ---\n{head}" if head else ""
    return f"{head}--- last lines of {path} ---\n{tail}"


def live_group_members(pgid: int) -> list[int]:
    """Pids of the processes of group ``pgid`` that are not zombies (Linux ``/proc``)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()  # after "pid (comm) "
        except (OSError, IndexError):
            continue  # exited while we looked
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def kill_group(popen: subprocess.Popen, grace_s: float) -> None:  # type: ignore[type-arg]
    """SIGTERM the process group, wait ``grace_s``, then SIGKILL what is left; reap the parent.

    Also used as a ``weakref.finalize`` callback, so it must not reference the server object.
    """
    pgid = popen.pid  # start_new_session=True: the leader's pid is the group id
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Children (vLLM's EngineCore, workers) may outlive the leader: kill the group regardless.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=10)
    # SIGKILL is asynchronous: return once no live process of the group is left (bounded).
    deadline = time.monotonic() + 10
    while live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


class ServerProcess:
    """One server subprocess with its log file (see the module docstring)."""

    def __init__(self, command: ServerCommand, log_path: Path) -> None:
        self.command = command
        self.log_path = Path(log_path)
        self.popen: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def name(self) -> str:
        return self.command.name

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.command.port}"

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Spawn the process (returns at once; call :meth:`wait_healthy` next)."""
        if self.popen is not None:
            raise RuntimeError(f"server {self.name} was already started")
        env = {k: v for k, v in os.environ.items() if k not in self.command.unset_env}
        env.update(self.command.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {shlex.join(self.command.argv)}\n".encode())
            log.flush()
            argv = list(self.command.argv)
            if self.command.python:
                argv = [argv[0], "-c", _ORPHAN_GUARD, str(os.getpid()), *argv]
            try:
                self.popen = _SPAWNER.submit(
                    subprocess.Popen,
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # own process group: stop() kills its children too
                ).result()
            except OSError as exc:
                raise ServerError(
                    f"server {self.name} could not be started: {exc} (command: "
                    f"{self.command.argv[0]!r}); check the interpreter path in "
                    "[engines.rollout.options] python, or build the engine's environment with "
                    "`rlctl engines install ENGINE`"
                ) from exc
        # Reaped even if the owner forgets stop(): on garbage collection and at exit.
        self._finalizer = weakref.finalize(self, kill_group, self.popen, 5.0)

    def wait_healthy(self, timeout_s: float, poll_s: float = 0.25) -> None:
        """Block until ``GET health_path`` answers 200; on death or timeout stop it and raise."""
        popen = self._require_started()
        deadline = time.monotonic() + timeout_s
        health = self.url + self.command.health_path
        while True:
            code = popen.poll()
            if code is not None:
                self.stop()
                raise ServerError(
                    f"server {self.name} exited with code {code} before becoming healthy"
                    f"{self._log_suffix()}"
                )
            if _http_ok(health, timeout_s=min(2.0, max(0.1, deadline - time.monotonic()))):
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise ServerError(
                    f"server {self.name} did not answer {health} with 200 within "
                    f"{timeout_s:.0f} s (raise startup_timeout_s if the machine is slow)"
                    f"{self._log_suffix()}"
                )
            time.sleep(poll_s)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate the process group and reap it (idempotent)."""
        if self.popen is None:
            return
        if self._finalizer is not None:
            self._finalizer.detach()
        kill_group(self.popen, grace_s)

    def log_tail(self, lines: int = 40) -> str:
        return read_log_tail(self.log_path, lines)

    def _log_suffix(self) -> str:
        return "\n" + log_excerpt(self.log_path)

    def _require_started(self) -> subprocess.Popen[bytes]:
        if self.popen is None:
            raise RuntimeError(f"server {self.name} was not started: call start() first")
        return self.popen

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _http_ok(url: str, timeout_s: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def wait_for_urls(urls: Sequence[str], timeout_s: float, health_path: str = "/health") -> None:
    """Attach mode: every given server must answer ``health_path`` with 200 within the timeout."""
    deadline = time.monotonic() + timeout_s
    pending = [u.rstrip("/") for u in urls]
    while pending:
        pending = [u for u in pending if not _http_ok(u + health_path, timeout_s=2.0)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ServerError(
                f"server(s) {', '.join(pending)} did not answer {health_path} with 200 within "
                f"{timeout_s:.0f} s; check [engines.rollout.options] urls and that the servers run"
            )
        time.sleep(0.5)


def start_servers(servers: Sequence[ServerProcess], timeout_s: float) -> None:
    """Start every server, then wait for all (they boot in parallel); on failure stop them all."""
    try:
        for server in servers:
            server.start()
        deadline = time.monotonic() + timeout_s
        for server in servers:
            # One deadline for the group: the servers have been booting side by side.
            server.wait_healthy(max(0.0, deadline - time.monotonic()))
    except BaseException:
        for server in servers:
            server.stop()
        raise
