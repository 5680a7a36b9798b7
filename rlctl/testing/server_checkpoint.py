"""A tiny checkpoint every inference server can load, for rollout-engine tests (no download).

Server engines load checkpoints from disk, and their CPU kernels have limits the default tiny
model breaks (vLLM's CPU attention needs head_dim >= 32). :data:`SERVER_TINY_SHAPE` fits vLLM,
SGLang and transformers alike, so one checkpoint serves every engine's parity test.
:func:`sharpened_state` redraws the weights with a larger spread than the 0.02-std init: that
init gives a near-uniform next-token distribution whose greedy answer repeats one token, and
parity or weight-update tests would then prove nothing.

Third-party rollout-engine authors can use the same checkpoint to compare with ``hf``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rlctl.config.recipe import Recipe

SERVER_TINY_SHAPE: dict[str, int] = {
    "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 128,
}
"""``[model.tiny]`` of a tiny Qwen3 that vLLM's and SGLang's CPU paths accept."""

# Prompts of different lengths (token ids of the 32-token tiny vocabulary, <bos> = 1).
PARITY_PROMPTS: list[list[int]] = [
    [1, 5, 6, 7, 14],
    [1, 9, 14],
    [1, 4, 4, 4, 4, 4, 14],
    [1, 20, 21, 22],
    [1, 30],
    [1, 8, 7, 6, 5, 4, 3],
]


def server_tiny_recipe(
    backend: str = "hf",
    path: str = "tiny",
    tiny: dict[str, int] | None = None,
    *,
    weight_sync_options: dict[str, Any] | None = None,
    **rollout_options: Any,
) -> Recipe:
    """A CPU fp32 recipe whose rollout engine ``backend`` serves the server-compatible tiny model.

    ``rollout_options`` go to ``[engines.rollout.options]``, ``weight_sync_options`` to
    ``[engines.rollout.weight_sync_options]``.
    """
    from rlctl.config.recipe import Recipe

    return Recipe.model_validate({
        "run": {"seed": 0, "device": "cpu"},
        "data": {"task": "count_digits"},  # a valid recipe needs prompts; engines read none
        "model": {"path": path, "dtype": "float32",
                  "tiny": SERVER_TINY_SHAPE if tiny is None else tiny},
        "engines": {"rollout": {"backend": backend, "options": rollout_options,
                                "weight_sync_options": weight_sync_options or {}}},
    })


def sharpened_state(seed: int, std: float = 0.15) -> dict[str, torch.Tensor]:
    """Weights of the server tiny model, matrices redrawn with ``std`` (see the module
    docstring)."""
    import torch

    from rlctl.models.loading import load_causal_lm

    model = load_causal_lm(server_tiny_recipe().model, seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return {k: v.clone() for k, v in model.state_dict().items()}


def save_server_checkpoint(out: Path, seed: int = 0) -> Path:
    """Write the sharpened tiny model and its tokenizer to ``out`` with ``save_pretrained``."""
    from rlctl.models.loading import load_causal_lm, load_tokenizer

    recipe = server_tiny_recipe()
    model = load_causal_lm(recipe.model, seed)
    model.load_state_dict(sharpened_state(seed))
    model.save_pretrained(out)
    load_tokenizer(recipe.model).save_pretrained(out)
    return out
