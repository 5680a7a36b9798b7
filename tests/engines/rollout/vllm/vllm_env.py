"""Helpers of the vllm engine tests: where its own environment is, and a tiny recipe.

The real-server tests need the env built by ``rlctl engines install vllm`` (found by
:mod:`rlctl.engines.rollout.server.engine_envs`; ``RLCTL_VLLM_PYTHON`` points at another
interpreter).
They are skipped, with the reason, when it is absent. The checkpoint helpers are shared by
every engine's tests (:mod:`rlctl.testing.server_checkpoint`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.engine_envs import ENV_NAMES, built_env_python, env_root
from rlctl.testing.server_checkpoint import SERVER_TINY_SHAPE as TINY_SHAPE
from rlctl.testing.server_checkpoint import server_tiny_recipe, sharpened_state

__all__ = ["TINY_SHAPE", "VLLM_PYTHON", "engine_spec", "requires_vllm_env", "sharpened_state",
           "tiny_recipe"]


def _find_python() -> str | None:
    explicit = os.environ.get("RLCTL_VLLM_PYTHON")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return built_env_python("vllm")


VLLM_PYTHON = _find_python()
requires_vllm_env = pytest.mark.skipif(
    VLLM_PYTHON is None,
    reason=f"vllm environment not built: run rlctl engines install vllm (expects "
    f"{env_root() / ENV_NAMES['vllm']}/.rlctl-env-complete) or set RLCTL_VLLM_PYTHON",
)


def tiny_recipe(path: str = "tiny", tiny: dict | None = None, *, weight_sync: dict | None = None,
                **rollout_options: object) -> Recipe:
    """A recipe for the vllm engine on the server-compatible tiny model, fp32, on CPU;
    ``weight_sync`` is its ``[engines.rollout.weight_sync_options]``."""
    return server_tiny_recipe("vllm", path, tiny, weight_sync_options=weight_sync,
                              **rollout_options)


def engine_spec(recipe: Recipe, seed: int = 0) -> RolloutEngineSpec:
    """The spec the rollout worker builds: the recipe's weight-sync options, validated."""
    return replace(RolloutEngineSpec.from_loaded(validate_recipe(recipe)), seed=seed)
