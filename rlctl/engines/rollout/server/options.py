"""Options every server-mode rollout engine shares (``vllm``, ``sglang``); no torch import.

A recipe chooses what these servers run: ``python`` (an interpreter, or any executable) runs
``-m server_module`` with ``extra_args`` and ``env``. That is code execution by design, so a
recipe is trusted input (docs/security.md); what is checked keeps a typo or a pasted recipe
from running something unintended: ``python`` must be an absolute path (here) to an
executable file (:func:`interpreter_problem`, at validate time through
``rlctl.plugins.rollout_engines``), ``server_module`` a dotted module name, and ``env`` may
not set the variables that make the loader or the interpreter run other code first
(``LD_PRELOAD``, ``PYTHONSTARTUP``...) unless ``allow_loader_env`` says so.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from rlctl.config.strict import STRICT_CONFIG

WEIGHT_SYNC_OPTIONS = "engines.rollout.weight_sync_options"
"""Where weight-sync options live (the registered sync's model validates them)."""

# Variables that load or run code before the server's own: the dynamic loader's and the
# interpreter's start-up hooks. (LD_* and DYLD_* as prefixes: the loaders have many.)
LOADER_ENV_PREFIXES = ("LD_", "DYLD_")
LOADER_ENV = frozenset({
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR",
    "PYTHONEXECUTABLE", "PYTHONBREAKPOINT", "PYTHONWARNINGS",  # the last two import by name
    "BASH_ENV", "ENV", "GCONV_PATH", "PERL5OPT", "NODE_OPTIONS",
})
INTERPRETER_FIX = ("give the absolute path of the engine env's interpreter (e.g. "
                   "~/.cache/rlctl/envs/<engine>/bin/python, expanded), or leave python out to "
                   "use the env `rlctl engines install` built")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def is_loader_variable(name: str) -> bool:
    """Whether setting ``name`` can make a process load or run code of the setter's choice."""
    upper = name.upper()
    return upper in LOADER_ENV or upper.startswith(LOADER_ENV_PREFIXES)


def interpreter_problem(path: str) -> str | None:
    """Why ``path`` cannot be the server's interpreter, or ``None`` when it can."""
    if not os.path.isabs(path):
        return f"{path!r} is a relative path"
    if not os.path.exists(path):
        return f"{path} does not exist"
    if not os.path.isfile(path):
        return f"{path} is not a file"
    if not os.access(path, os.X_OK):
        return f"{path} is not executable"
    return None


class ServerOptions(BaseModel):
    """Where the servers come from and how long they may take."""

    model_config = STRICT_CONFIG

    @model_validator(mode="before")
    @classmethod
    def _weight_sync_moved(cls, data: Any) -> Any:
        """``[engines.rollout.options.weight_sync]`` was the old home of weight-sync options:
        say where they are now instead of calling the key unknown."""
        if isinstance(data, dict) and "weight_sync" in data:
            error = PydanticCustomError(
                "moved_key", "weight-sync options are no longer engine options",
                {"to": WEIGHT_SYNC_OPTIONS},
            )
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                type=error, loc=("weight_sync",), input=data["weight_sync"])])
        return data

    urls: list[str] = []
    """Already running servers to use; empty = start servers."""
    python: str | None = None
    """Interpreter that starts servers (engines pin their own torch), an absolute path to an
    executable; ``None`` = ``RLCTL_<ENGINE>_PYTHON``, else the env ``rlctl engines install`` built,
    else this one."""
    extra_args: list[str] = []
    """Extra command-line arguments for the server."""
    tensor_parallel_size: PositiveInt = 1
    """Devices per server replica."""
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)
    """Fraction of device memory the server may take (KV cache included)."""
    max_model_len: PositiveInt | None = None
    """Longest prompt + response; ``None`` = the model's."""
    startup_timeout_s: float = Field(300.0, gt=0)
    """Seconds a server may take to become healthy."""
    request_timeout_s: float = Field(600.0, gt=0)
    """Seconds one generation request may take."""
    allow_loader_env: bool = False
    """Let ``env`` set loader and interpreter start-up variables (``LD_PRELOAD``,
    ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``PYTHONSTARTUP``...): they make the server run other code
    first."""

    @field_validator("python")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # Only the path's form here: whether it exists and is executable is a property of the
        # machine, checked by `config validate` / `train` (the engines' validate_config hook)
        # and again when the server starts.
        if value is not None and not os.path.isabs(value):
            raise _invalid(interpreter_problem(value) or "", INTERPRETER_FIX)
        return value

    @field_validator("server_module", check_fields=False)
    @classmethod
    def _module_name(cls, value: str) -> str:
        if not _MODULE.match(value):
            raise _invalid(f"{value!r} is not a module name", "give dotted identifiers only (it "
                           "runs as python -m MODULE), or leave server_module out for the default")
        return value

    @field_validator("env", check_fields=False)
    @classmethod
    def _no_loader_variables(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        refused = sorted(k for k in value if is_loader_variable(k))
        if refused and not info.data.get("allow_loader_env", False):
            raise _invalid(f"env sets {', '.join(refused)}, which make the server load or run "
                           "other code before its own",
                           "remove them, or set allow_loader_env = true in the same table if "
                           "this recipe is meant to do that")
        return value


def _invalid(message: str, fix: str) -> PydanticCustomError:
    # The fix travels in the error's context; rlctl.config.validation prints it as the fix.
    return PydanticCustomError("value_error", message, {"fix": fix})
