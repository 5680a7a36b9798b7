"""``rlctl export``: an HF-format copy of a checkpoint's policy, on request, without a cluster.

The trainer's checkpoint holds the actor as ``torch.distributed.checkpoint`` shards
(``train/actor``); this reads them in one process (DCP needs no process group for that),
rebuilds the model skeleton from the checkpoint's own resolved config, and writes
safetensors loadable by ``AutoModelForCausalLM.from_pretrained``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rlctl.checkpoint.export_target import ExportTargetError, check_export_target


def export_checkpoint(
    checkpoint: Path | str, out_dir: Path | str, *, overwrite: bool = False
) -> Path:
    """Export ``checkpoint`` (a checkpoint, a ``checkpoints/`` folder or a run directory) to
    ``out_dir``; the output rules are :func:`check_export_target`'s."""
    from rlctl.checkpoint.manager import CheckpointError, resolve_checkpoint

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
    from rlctl.checkpoint.verify import CheckpointDamaged, verify_checkpoint

    verify_checkpoint(ckpt)  # sizes against COMPLETE, JSON files, a safe read of each index
    shards = ckpt / "train" / "actor"
    if not shards.is_dir():
        raise FileNotFoundError(f"{ckpt} has no actor shards (expected {shards})")

    from rlctl.checkpoint import safe_dcp
    from rlctl.checkpoint.config_compat import load_config_snapshot
    from rlctl.checkpoint.hf_export import export_hf
    from rlctl.config.recipe import Recipe
    from rlctl.models.loading import ModelDirError, load_causal_lm, load_tokenizer

    try:
        recipe = Recipe.model_validate(load_config_snapshot(ckpt))
    except ValidationError as exc:
        raise CheckpointError(
            f"{ckpt / 'config.json'} is not a recipe this rlctl reads "
            f"({exc.error_count()} problem(s), first at "
            f"{'.'.join(map(str, exc.errors()[0]['loc']))})") from None
    state = safe_dcp.load_full(shards).get("model")  # all shards -> one dict, no cluster
    if not isinstance(state, dict):
        raise CheckpointDamaged(f"{shards} holds no model weights")
    # the checkpoint's config names the model to rebuild; it must not make us run model code
    model = recipe.model.model_copy(update={"trust_remote_code": False})
    try:
        skeleton = load_causal_lm(model, recipe.run.seed)
        tokenizer = load_tokenizer(model)
    except ModelDirError as exc:
        raise CheckpointError(f"{ckpt} was trained from a model rlctl export cannot rebuild: "
                              f"{exc}") from None
    except (OSError, ValueError, KeyError) as exc:  # transformers' own refusals: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{ckpt}: cannot rebuild its model from {model.path!r} "
                              f"({type(exc).__name__}: {first})") from None
    return export_hf(state, skeleton.config, tokenizer, out_dir,
                     overwrite=overwrite, source=str(ckpt))
