"""Helpers of the sglang engine tests: where its own environment is, and a tiny recipe.

The real-server tests need the env built by ``rlctl engines install sglang`` (found by
:mod:`rlctl.engines.rollout.server.engine_envs`; ``RLCTL_SGLANG_PYTHON`` points at another
interpreter).
They are skipped, with the reason, when it is absent. The checkpoint helpers are shared by
every engine's tests (:mod:`rlctl.testing.server_checkpoint`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.server.engine_envs import ENV_NAMES, built_env_python, env_root
from rlctl.testing.server_checkpoint import SERVER_TINY_SHAPE as TINY_SHAPE
from rlctl.testing.server_checkpoint import server_tiny_recipe, sharpened_state

__all__ = ["SGLANG_PYTHON", "TINY_SHAPE", "requires_sglang_env", "sharpened_state", "tiny_recipe"]


def _find_python() -> str | None:
    explicit = os.environ.get("RLCTL_SGLANG_PYTHON")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return built_env_python("sglang")


SGLANG_PYTHON = _find_python()
requires_sglang_env = pytest.mark.skipif(
    SGLANG_PYTHON is None,
    reason=f"sglang environment not built: run rlctl engines install sglang (expects "
    f"{env_root() / ENV_NAMES['sglang']}/.rlctl-env-complete) or set RLCTL_SGLANG_PYTHON",
)


def tiny_recipe(path: str = "tiny", tiny: dict | None = None, **rollout_options: object) -> Recipe:
    """A recipe for the sglang engine on the server-compatible tiny model, fp32, on CPU."""
    return server_tiny_recipe("sglang", path, tiny, **rollout_options)
