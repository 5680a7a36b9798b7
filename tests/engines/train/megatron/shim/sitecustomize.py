"""TEST-ONLY: apply the megatron CPU shim in every Python process that imports megatron.

Use: ``PYTHONPATH=tests/engines/train/megatron/shim rlctl train RECIPE -s engines.train.backend=
megatron``. Ray workers inherit the driver's environment, so they get it too. Nothing is
imported until the first ``import megatron`` (other processes pay nothing); then
``tests/engines/train/megatron/cuda_shim.py`` is installed before megatron's modules execute.
"""

from __future__ import annotations

import importlib.abc
import os
import sys


class _InstallShimOnMegatronImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "megatron":
            return
        sys.meta_path.remove(self)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import cuda_shim

        cuda_shim.install()
        return  # let the normal finders import megatron (now through the shim)


sys.meta_path.insert(0, _InstallShimOnMegatronImport())
