"""What ``rlctl eval --model`` accepts, turned into a checkpoint directory engines load.

In this order:

1. a catalog name (``smollm2-135m``): the directory ``rlctl models install`` wrote;
2. ``tiny``: the offline tiny model (written out to a temporary directory);
3. an HF checkpoint directory (it has ``config.json``): a downloaded model, or an export
   (``rlctl export``, or a run's ``hf/``), used as it is;
4. a run directory: its final export ``hf/`` when there is one, else its latest checkpoint;
5. a checkpoint (``checkpoints/step_N``) or a ``checkpoints/`` folder: exported to a
   temporary directory first (:func:`rlctl.checkpoint.offline_export.export_checkpoint`),
   removed when the evaluation ends.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlctl.evals.runner import EvalSetupError


@contextlib.contextmanager
def model_directory(model: str, recipe: Any) -> Iterator[str]:
    """The checkpoint directory for ``model`` (see the module doc), for the ``with`` block."""
    from rlctl.models.catalog import CATALOG, ModelNotInstalledError, resolve_model_path

    if model in CATALOG:
        try:
            yield resolve_model_path(model)
        except ModelNotInstalledError as exc:
            raise EvalSetupError(str(exc)) from None
        return
    if model == "tiny":
        with _temporary() as out:
            yield _write_tiny(recipe, out)
        return
    path = Path(model)
    if is_hf_checkpoint(path):
        yield str(path)
        return
    if is_hf_checkpoint(path / "hf"):
        yield str(path / "hf")
        return
    from rlctl.checkpoint.manager import CheckpointError, resolve_checkpoint

    try:
        checkpoint = resolve_checkpoint(path, asked_by="--model")
    except CheckpointError as exc:
        raise EvalSetupError(
            f"{exc}; --model takes a catalog name (rlctl models list), an HF checkpoint "
            "directory, a run directory or a checkpoint") from None
    from rlctl.checkpoint.offline_export import export_checkpoint

    with _temporary() as out:
        yield str(export_checkpoint(checkpoint, out / "model"))


def is_hf_checkpoint(path: Path) -> bool:
    """A directory with an HF ``config.json`` and weights beside it (an rlctl checkpoint has a
    ``config.json`` too, the recipe's snapshot, but its weights are shards under ``train/``)."""
    weights = [*path.glob("*.safetensors"), *path.glob("pytorch_model*.bin")]
    return (path / "config.json").is_file() and bool(weights)


@contextlib.contextmanager
def _temporary() -> Iterator[Path]:
    out = Path(tempfile.mkdtemp(prefix="rlctl-eval-"))
    try:
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)  # our own temporary directory only


def _write_tiny(recipe: Any, out: Path) -> str:
    from rlctl.models.loading import load_causal_lm, load_tokenizer

    model = recipe.model.model_copy(update={"path": "tiny", "tokenizer": None})
    load_causal_lm(model, recipe.run.seed).save_pretrained(out)
    load_tokenizer(model).save_pretrained(out)
    return str(out)
