"""TEST-ONLY patch layer that lets real megatron-core 0.16 run on a CPU-only torch.

Megatron-core hard-codes CUDA in places the ``megatron`` engine reaches on any device:
``torch.cuda.current_device()`` as a tensor device, ``device="cuda"`` literals (causal mask,
pipeline token counters), ``torch.cuda.get_rng_state`` in the tensor-parallel RNG tracker,
CUDA streams/events in DDP's grad sync, ``tensor.cuda()`` for tied embeddings under PP.
None of that is math: on a GPU it is correct, on this CPU machine it is the only blocker.

What it does, and only inside ``megatron.*`` modules (torch itself stays untouched, except
``Tensor.cuda`` which returns the tensor unchanged when CUDA is unavailable):

* every ``megatron.*`` module's global ``torch`` is replaced by :class:`_CpuTorch`, a proxy
  that forwards everything to torch except ``torch.cuda`` (a CPU stand-in: current device is
  ``"cpu"``, streams/events are no-ops, the "CUDA" RNG is a private CPU generator) and the
  tensor factories, whose ``device="cuda..."`` arguments become ``"cpu"``;
* the tensor-parallel RNG helpers read/write that private generator.

Never import this from the ``rlctl`` package: it exists so tests (and ``PYTHONPATH=
tests/engines/train/megatron/shim rlctl train ...``) exercise the real engine code on CPU.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

import torch

_FACTORIES = (
    "zeros", "ones", "empty", "full", "tensor", "arange", "as_tensor", "rand", "randn",
    "randint", "zeros_like", "ones_like", "empty_like", "full_like", "linspace", "eye",
)
_RNG = torch.Generator()  # the stand-in for the CUDA default generator


def _cpu_device(device: Any) -> Any:
    if isinstance(device, int):
        return "cpu"
    if isinstance(device, torch.device) and device.type == "cuda":
        return "cpu"
    if isinstance(device, str) and device.startswith("cuda"):
        return "cpu"
    return device


def _on_cpu(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs:
            kwargs["device"] = _cpu_device(kwargs["device"])
        kwargs.pop("pin_memory", None)
        return fn(*args, **kwargs)

    return wrapper


class _NullStream:
    """A CUDA stream/event stand-in: CPU work is synchronous, so every call is a no-op."""

    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0


class _Nvtx:
    def __getattr__(self, name: str) -> Any:
        if name == "range":
            return lambda *a, **k: contextlib.nullcontext()
        return lambda *args, **kwargs: None


class _CpuCuda(types.ModuleType):
    """``torch.cuda`` as megatron sees it under the shim."""

    def __init__(self) -> None:
        super().__init__("torch.cuda(cpu shim)")
        self.nvtx = _Nvtx()
        self.random = types.SimpleNamespace(get_rng_state=self.get_rng_state)
        self.Stream = self.Event = self.ExternalStream = _NullStream

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cuda, name)

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_stream(*args: Any, **kwargs: Any) -> _NullStream:
        return _NullStream()

    default_stream = current_stream

    @staticmethod
    def stream(*args: Any, **kwargs: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    @staticmethod
    def synchronize(*args: Any, **kwargs: Any) -> None: ...

    @staticmethod
    def empty_cache() -> None: ...

    @staticmethod
    def set_device(*args: Any, **kwargs: Any) -> None: ...

    @staticmethod
    def get_rng_state(*args: Any, **kwargs: Any) -> torch.Tensor:
        return _RNG.get_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        _RNG.set_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        _RNG.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def memory_allocated(*args: Any, **kwargs: Any) -> int:
        return 0

    memory_reserved = max_memory_allocated = memory_allocated


class _CpuTorch(types.ModuleType):
    """The ``torch`` global of megatron modules: torch, with CUDA devices mapped to CPU."""

    def __init__(self) -> None:
        super().__init__("torch(cpu shim)")
        self.cuda = _CpuCuda()
        for name in _FACTORIES:
            setattr(self, name, _on_cpu(getattr(torch, name)))
        self.autocast = lambda device_type, *a, **k: torch.autocast("cpu", *a, **k)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


CPU_TORCH = _CpuTorch()


def _patch_module(module: types.ModuleType) -> None:
    if getattr(module, "torch", None) is torch:
        module.torch = CPU_TORCH
    if module.__name__ == "megatron.core.tensor_parallel.random":
        module._get_cuda_rng_state = lambda *args, **kwargs: _RNG.get_state()
        module._set_cuda_rng_state = lambda state, *args, **kwargs: _RNG.set_state(state)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _patch_module(module)


class _MegatronFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of every ``megatron.*`` module so it is patched once executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith("megatron."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


def _tensor_cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    return self


def install() -> None:
    """Patch every megatron module, loaded now or later (idempotent)."""
    if torch.cuda.is_available():
        return  # a real GPU: nothing to shim
    if not any(isinstance(f, _MegatronFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MegatronFinder())
    for name, module in list(sys.modules.items()):
        if name.startswith("megatron.") and module is not None:
            _patch_module(module)
    torch.Tensor.cuda = _tensor_cuda  # type: ignore[method-assign]
