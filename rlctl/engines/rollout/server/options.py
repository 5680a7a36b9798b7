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
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from rlctl.config.strict import RolloutEngineOptions

WEIGHT_SYNC_OPTIONS = "engines.rollout.weight_sync_options"
"""Where weight-sync options live (the registered sync's model validates them)."""

# What a recipe's env may set for the servers: an allow-list. (A block-list of the loader's
# and the interpreter's start-up variables let PYTHONPYCACHEPREFIX through: the server then
# ran a crafted .pyc.) Allowed are the knobs these servers are tuned with: threads, device
# selection, the engines' and their libraries' own settings...
SERVER_ENV_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
    "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "NUMEXPR_MAX_THREADS", "MALLOC_ARENA_MAX", "TZ",
})
SERVER_ENV_PREFIXES = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "VLLM_", "SGLANG_", "NCCL_",
                       "TORCH_NCCL_", "GLOO_", "UCX_")
# ... except, among those, names that point the process at files, code or caches it then
# reads or runs (VLLM_LOGGING_CONFIG_PATH, VLLM_PLUGINS, NCCL_NET_PLUGIN, VLLM_CACHE_ROOT...)
# or that turn a safety off (VLLM_ALLOW_INSECURE_SERIALIZATION).
RISKY_ENV_WORDS = frozenset({
    "PATH", "PATHS", "DIR", "DIRS", "HOME", "CACHE", "CONFIG", "CONF", "FILE", "ROOT", "PREFIX",
    "PLUGIN", "PLUGINS", "LIB", "LIBRARY", "MODULE", "MODULES", "PRELOAD", "SCRIPT", "EXEC",
    "INSECURE", "UNSAFE", "TRUST", "PICKLE"})
"""Words (between underscores) of those names: ``VLLM_CPU_KVCACHE_SPACE`` (a size) passes."""
LOADER_ENV = frozenset({
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR",
    "PYTHONEXECUTABLE", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
    "BASH_ENV", "ENV", "GCONV_PATH", "PERL5OPT", "NODE_OPTIONS",
})
"""Examples of what the allow-list keeps out (named in docs/security.md): variables that make
the loader or the interpreter run code of the setter's choice."""
INTERPRETER_FIX = ("give the absolute path of the engine env's interpreter (e.g. "
                   "~/.cache/rlctl/envs/<engine>/bin/python, expanded), or leave python out to "
                   "use the env `rlctl engines install` built")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def env_variable_allowed(name: str) -> bool:
    """Whether a recipe's ``env`` may set ``name`` for a server without
    ``allow_loader_env`` (see :data:`SERVER_ENV_NAMES`)."""
    upper = name.upper()
    if upper in SERVER_ENV_NAMES:
        return True
    return upper.startswith(SERVER_ENV_PREFIXES) and not RISKY_ENV_WORDS & set(upper.split("_"))


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


class ServerOptions(RolloutEngineOptions):
    """Where the servers come from and how long they may take."""

    def devices_per_worker(self, replicas: int) -> int:
        """Every replica is a server of ``tensor_parallel_size`` devices (none when the
        servers run elsewhere: ``urls``)."""
        return 0 if self.urls else replicas * self.tensor_parallel_size

    @property
    def starts_replicas(self) -> bool:
        """Servers of its own, unless it attaches to running ones (``urls``)."""
        return not self.urls

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
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Attached servers (``urls``) that require an API key: the environment variable holding
    it (the key never goes into a recipe). Servers rlctl starts get a fresh key per run."""
    allow_loader_env: bool = False
    """Let ``env`` set variables outside its allow-list (threads, device selection and the
    engines' own ``VLLM_*`` / ``SGLANG_*`` / ``NCCL_*`` settings): ``LD_PRELOAD``,
    ``PYTHONPATH``, ``PYTHONPYCACHEPREFIX``, paths, caches, plugins... make the server read or
    run other code."""

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
    def _allowed_variables(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        refused = sorted(k for k in value if not env_variable_allowed(k))
        if refused and not info.data.get("allow_loader_env", False):
            raise _invalid(f"env sets {', '.join(refused)}, which a recipe may not set for a "
                           "server: only threads, device selection and the engines' own "
                           "settings are allowed (a path, a cache, a plugin or a loader "
                           "variable makes the server read or run other code)",
                           "remove them, or set allow_loader_env = true in the same table if "
                           "this recipe is meant to do that")
        return value


def _invalid(message: str, fix: str) -> PydanticCustomError:
    # The fix travels in the error's context; rlctl.config.validation prints it as the fix.
    return PydanticCustomError("value_error", message, {"fix": fix})
