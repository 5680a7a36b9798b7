"""``rlctl engines install ENGINE...`` and ``rlctl engines list``: the server engines' own envs.

vLLM and SGLang pin their own torch, so their servers run from virtual environments of their
own (see :mod:`rlctl.engines.rollout.server.engine_envs`). ``install`` runs the build script
that ships in the package, shows its steps as they happen, and keeps pip's full output in a log
file next to the envs. No torch or Ray import here.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Annotated

import typer

from rlctl.cli.common import EXIT_RUN_FAILURE, EXIT_USAGE, fail
from rlctl.hookspecs import hookimpl

BUILD_SCRIPT = (
    Path(__file__).resolve().parents[1] / "engines" / "rollout" / "server" / "build_engine_envs.sh"
)
STEP_PREFIX = "[build_engine_envs] "

engines_app = typer.Typer(
    name="engines",
    help="The server engines' own Python environments (vLLM, SGLang): install, list.",
    no_args_is_help=True,
)


@engines_app.callback()
def _engines_group() -> None:
    """The server engines' own Python environments (vLLM, SGLang): install, list."""


def _known() -> list[str]:
    from rlctl.engines.rollout.server.engine_envs import ENV_NAMES

    return sorted(ENV_NAMES)


@engines_app.command("list")
def list_engines() -> None:
    """Each server engine: whether its environment is built, and where (one line each)."""
    from rlctl.engines.rollout.server.engine_envs import ENV_NAMES, MARKER, env_root

    for engine in _known():
        env = env_root() / ENV_NAMES[engine]
        if (env / MARKER).is_file():
            status = "built"
        elif env.exists():
            status = "incomplete"  # a build stopped half-way: install rebuilds it
        else:
            status = "missing"
        typer.echo(f"{engine:<8} {status:<11} {env}")


@engines_app.command("install")
def install(
    engines: Annotated[list[str], typer.Argument(help="Engines to build: vllm, sglang.")],
    timeout_s: Annotated[
        float, typer.Option(min=1, help="Give up (and stop the build) after this many seconds.")
    ] = 3600.0,
) -> None:
    """Build the engines' environments (cached per machine: a rerun is a no-op).

    Uses ``RLCTL_ENV_DIR`` (default ``~/.cache/rlctl/envs``). pip's output goes to
    ``<env dir>/install.log``; the steps are shown here as they happen.
    """
    known = _known()
    unknown = [e for e in engines if e not in known]
    if unknown:
        fail(f"unknown engine {', '.join(map(repr, unknown))}", code=EXIT_USAGE,
             fix=f"choose from {', '.join(known)}")
    from rlctl.engines.rollout.server.engine_envs import env_root

    root = env_root()
    log_path = root / "install.log"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with log_path.open("a", encoding="utf-8"):
            pass  # writable: the build writes its log and the envs here
    except OSError as exc:  # a file, a read-only directory, no space: this machine's problem
        fail(f"cannot use {root} for the engines' environments: {exc.strerror or exc}",
             fix="set RLCTL_ENV_DIR to a writable directory (default ~/.cache/rlctl/envs)")
    code, pythons = _run_build(engines, log_path, timeout_s)
    if code != 0:
        tail = _tail(log_path, 15)
        typer.echo(tail, err=True)
        fail(f"building {' '.join(engines)} failed (exit {code}); full log: {log_path}",
             code=EXIT_RUN_FAILURE if code != EXIT_USAGE else EXIT_USAGE)
    for line in pythons:
        typer.echo(line)


def _run_build(engines: list[str], log_path: Path, timeout_s: float) -> tuple[int, list[str]]:
    """Run the build script; show its step lines under a spinner, everything into the log."""
    from rich.console import Console
    from rich.markup import escape

    from rlctl.engines.rollout.server.process import kill_group

    console = Console(stderr=True)
    pythons: list[str] = []
    deadline = time.monotonic() + timeout_s
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n=== rlctl engines install {' '.join(engines)} at {time.ctime()} ===\n")
        log.flush()
        proc = subprocess.Popen(
            ["bash", str(BUILD_SCRIPT), *engines],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=os.environ.copy(),
            start_new_session=True,  # a stopped build takes pip with it
        )
        assert proc.stdout is not None
        start = time.monotonic()
        lines = _lines_of(proc.stdout)  # read on a thread: a silent pip must not stop the clock
        with console.status("starting", spinner="dots") as status:
            try:
                while (line := _next_line(lines, deadline)) is not None:
                    log.write(line)
                    line = line.rstrip("\n")
                    if line.startswith(STEP_PREFIX):
                        step = line[len(STEP_PREFIX):]
                        console.print(f"[dim]{time.monotonic() - start:6.0f}s[/dim] {escape(step)}")
                        status.update(escape(step))
                    elif "=" in line and line.split("=", 1)[0] in ("vllm", "sglang"):
                        pythons.append(line)
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except (TimeoutError, subprocess.TimeoutExpired):
                kill_group(proc, 10.0)
                fail(f"the build took longer than {timeout_s:.0f} s and was stopped; "
                     f"log: {log_path}", fix="rerun with a larger --timeout-s",
                     code=EXIT_RUN_FAILURE)
            except KeyboardInterrupt:
                kill_group(proc, 10.0)
                raise
    return code, pythons


def _lines_of(stream: IO[str]) -> queue.Queue[str | None]:
    """The lines of ``stream``, read on a daemon thread; ``None`` once it is closed."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        try:
            for line in stream:
                lines.put(line)
        finally:
            lines.put(None)

    threading.Thread(target=pump, name="rlctl-build-output", daemon=True).start()
    return lines


def _next_line(lines: queue.Queue[str | None], deadline: float) -> str | None:
    """The next line (``None``: the output ended); :class:`TimeoutError` past ``deadline``,
    whether or not the build prints anything meanwhile."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            return lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue


def _tail(path: Path, lines: int) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:])


@hookimpl
def register_commands(cli):  # type: ignore[no-untyped-def]
    cli.add_typer(engines_app)
