"""TEST-ONLY: let SGLang 0.5's CPU server load LoRA adapters, by not pinning host memory in
``sglang.srt.lora``.

Why: SGLang's LoRA code pins host memory unconditionally (``pin_memory=True`` in
``sglang/srt/lora/layers.py``, ``.pin_memory()`` in ``lora/lora.py`` and the LoRA backends),
ignoring its own ``is_pin_memory_available()``, which its CPU platform answers ``False``.
Pinning needs a CUDA driver: on a machine without one the server dies at start
("RuntimeError: Found no NVIDIA driver on your system"). Pinned memory only speeds up
host-to-GPU copies; the values are the same, so on CPU the right thing is not to pin, which is
what this does, and only for code in ``sglang.srt.lora.*`` modules:

* each ``sglang.srt.lora.*`` module's global ``torch`` becomes a proxy of torch whose tensor
  factories drop ``pin_memory=True``;
* ``Tensor.pin_memory()`` returns the tensor itself when called from a ``sglang.srt.lora.*``
  module (any other caller gets torch's own method, and its error).

The LoRA compute is SGLang's own ``torch_native`` backend (plain torch ops), which rlctl's
server command selects on CPU. Nothing happens when CUDA is available.

Use: put this folder on the SGLang server's ``PYTHONPATH`` (the ``sglang`` engine's
``[engines.rollout.options] env``); ``tests/engines/rollout/sglang/test_sglang_lora.py`` does.
Never import it from the ``rlctl`` package: the product refuses adapter-only syncs to SGLang
on CPU (``rlctl.engines.rollout.sglang.server.CPU_NO_ADAPTERS``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

_PACKAGE = "sglang.srt.lora"
_FACTORIES = ("tensor", "as_tensor", "empty", "zeros", "ones", "full", "arange",
              "empty_like", "zeros_like", "ones_like", "full_like", "empty_strided")


def _in_lora(module_name: object) -> bool:
    return isinstance(module_name, str) and (
        module_name == _PACKAGE or module_name.startswith(_PACKAGE + "."))


def _unpinned(factory: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("pin_memory", None)
        return factory(*args, **kwargs)

    return wrapper


class _UnpinnedTorch(types.ModuleType):
    """The ``torch`` global of ``sglang.srt.lora.*`` modules: torch, never pinning."""

    def __init__(self, torch: types.ModuleType) -> None:
        super().__init__("torch(unpinned lora shim)")
        self._torch = torch
        for name in _FACTORIES:
            setattr(self, name, _unpinned(getattr(torch, name)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


_proxy: _UnpinnedTorch | None = None


def _patch(module: types.ModuleType) -> None:
    global _proxy
    torch = sys.modules.get("torch")
    if torch is None or module.__dict__.get("torch") is not torch:
        return
    if torch.cuda.is_available():
        return  # a real GPU: pinning works, nothing to shim
    if _proxy is None:
        _proxy = _UnpinnedTorch(torch)
        real_pin = torch.Tensor.pin_memory

        def pin_memory(self: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__")
            return self if _in_lora(caller) else real_pin(self, *args, **kwargs)

        torch.Tensor.pin_memory = pin_memory
    module.torch = _proxy


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _patch(module)


class _LoRAFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of every ``sglang.srt.lora.*`` module so it is patched once run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not _in_lora(name):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader)
        return spec


sys.meta_path.insert(0, _LoRAFinder())
