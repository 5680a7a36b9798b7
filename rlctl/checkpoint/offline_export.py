"""``rlctl export``: an HF-format copy of a checkpoint's policy, on request, without a cluster.

The trainer's checkpoint holds the actor as ``torch.distributed.checkpoint`` shards
(``train/actor``); this reads them in one process (DCP needs no process group for that),
rebuilds the model skeleton from the checkpoint's own resolved config, and writes
safetensors loadable by ``AutoModelForCausalLM.from_pretrained``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rlctl.checkpoint.export_target import ExportTargetError, check_export_target


def export_checkpoint(checkpoint: Path | str, out_dir: Path | str, *, overwrite: bool = False) -> Path:
    """Export ``checkpoint`` (a checkpoint, a ``checkpoints/`` folder or a run directory) to
    ``out_dir``; the output rules are :func:`check_export_target`'s."""
    from rlctl.checkpoint.manager import resolve_checkpoint

    # Every refusal comes before torch is imported or a shard is read.
    ckpt = resolve_checkpoint(Path(checkpoint), asked_by="rlctl export")
    out_dir = Path(out_dir)
    check_export_target(out_dir, overwrite=overwrite)
    target, source = out_dir.resolve(), ckpt.resolve()
    if target == source or source in target.parents or target in source.parents:
        # Even with --overwrite: replacing the checkpoint's own directory (or one holding it)
        # would delete what is being exported, and writing inside it would alter it.
        raise ExportTargetError(
            f"export target {out_dir} overlaps the checkpoint {ckpt}: pass a directory outside it"
        )
    shards = ckpt / "train" / "actor"
    if not shards.is_dir():
        raise FileNotFoundError(f"{ckpt} has no actor shards (expected {shards})")

    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    from rlctl.checkpoint.config_compat import load_config_snapshot
    from rlctl.checkpoint.hf_export import export_hf
    from rlctl.config.recipe import Recipe
    from rlctl.models.loading import load_causal_lm, load_tokenizer

    recipe = Recipe.model_validate(load_config_snapshot(ckpt))
    with tempfile.TemporaryDirectory() as tmp:
        flat = Path(tmp) / "actor.pt"
        dcp_to_torch_save(str(shards), str(flat))  # all shards -> one state dict, no cluster
        state = torch.load(flat, weights_only=True)["model"]
    skeleton = load_causal_lm(recipe.model, recipe.run.seed)
    return export_hf(state, skeleton.config, load_tokenizer(recipe.model), out_dir,
                     overwrite=overwrite, source=str(ckpt))
