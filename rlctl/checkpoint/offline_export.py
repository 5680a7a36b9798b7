"""``rlctl export``: an HF-format copy of a checkpoint's policy, on request, without a cluster.

The trainer's checkpoint holds the actor as ``torch.distributed.checkpoint`` shards
(``train/actor``); this reads them in one process (DCP needs no process group for that),
rebuilds the model skeleton from the checkpoint's own resolved config, and writes
safetensors loadable by ``AutoModelForCausalLM.from_pretrained``.

A LoRA run's checkpoint (``[model.lora]``) holds only the adapters: they are exported in PEFT's
format (``adapter_config.json`` + ``adapter_model.safetensors``, for
``PeftModel.from_pretrained`` over the base model, or vLLM / SGLang's LoRA loading), or with
``merged=True`` merged into the base model (rebuilt from ``model.path``) as an HF model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlctl.checkpoint.export_target import ExportTargetError, check_export_target


def export_checkpoint(
    checkpoint: Path | str, out_dir: Path | str, *, overwrite: bool = False,
    merged: bool = False,
) -> Path:
    """Export ``checkpoint`` (a checkpoint, a ``checkpoints/`` folder or a run directory) to
    ``out_dir``; the output rules are :func:`check_export_target`'s. A LoRA checkpoint gives
    its adapter (PEFT's format), or with ``merged`` the base model with it merged in; a
    full-weight checkpoint is always the whole model."""
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
    if recipe.model.lora.enabled:
        return _export_lora(state, skeleton, tokenizer, recipe, out_dir,
                            overwrite=overwrite, merged=merged, source=str(ckpt))
    return export_hf(state, skeleton.config, tokenizer, out_dir,
                     overwrite=overwrite, source=str(ckpt))


def _export_lora(state: dict[str, Any], skeleton: Any, tokenizer: Any, recipe: Any,
                 out_dir: Path, *, overwrite: bool, merged: bool, source: str) -> Path:
    """The adapter of a LoRA checkpoint (``state``: the trained tensors under the adapted
    model's own names) over the rebuilt base ``skeleton``: PEFT's format, or merged."""
    import shutil

    from rlctl.checkpoint.atomic import fsync_dir
    from rlctl.checkpoint.export_target import new_partial_dir, publish, write_marker
    from rlctl.checkpoint.hf_export import export_hf
    from rlctl.checkpoint.manager import CheckpointDamaged
    from rlctl.models.loading import BUILT_IN_MODELS
    from rlctl.models.lora import AdapterWeights, adapter_state, add_adapters, config_dict

    peft = add_adapters(skeleton, recipe.model.lora, seed=recipe.run.seed)
    trained = {n for n, p in skeleton.named_parameters() if p.requires_grad}
    if set(state) != trained:
        raise CheckpointDamaged(f"{source} does not hold the adapters of its [model.lora]: "
                                f"missing {sorted(trained - set(state))[:3]}, unexpected "
                                f"{sorted(set(state) - trained)[:3]}")
    skeleton.load_state_dict(state, strict=False)  # the base weights are the skeleton's own
    if merged:
        plain = peft.merge_and_unload()  # PEFT's merge: W + alpha / r * B @ A
        return export_hf(plain.state_dict(), plain.config, tokenizer, out_dir,
                         overwrite=overwrite, source=source)
    config = config_dict(peft)
    if recipe.model.path not in BUILT_IN_MODELS:
        config["base_model_name_or_path"] = recipe.model.path
    partial = new_partial_dir(out_dir)
    try:
        AdapterWeights(adapter_state(peft, state), config).save(partial)
        write_marker(partial, source=source, adapter=True)
        publish(partial, out_dir, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # only the work directory this call made
        raise
    fsync_dir(out_dir.parent)
    return out_dir
