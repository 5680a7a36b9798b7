"""megatron engine tests. Those that need megatron-core skip unless it is installed
(``pip install megatron-core==0.16.1``, see docs/megatron.md). The engine runs here through
the test-only CUDA shim in ``cuda_shim.py``; spawned ranks install it themselves."""

from __future__ import annotations
