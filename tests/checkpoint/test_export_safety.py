"""`rlctl export` and `export_hf` never delete or write through what they did not write.

A real checkpoint (a tiny Qwen3's shards written with torch.distributed.checkpoint, its
config snapshot and COMPLETE manifest) is exported through the real CLI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import typer
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from rlctl.checkpoint import (
    EXPORT_MARKER,
    CheckpointManager,
    ExportTargetError,
    export_hf,
    save_config_snapshot,
)
from rlctl.checkpoint.export_target import check_export_target
from rlctl.cli.runs_cmd import register_commands
from rlctl.config.recipe import Recipe
from rlctl.models.loading import load_causal_lm

# dcp.save without a process group is the single-process save we mean
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """A root like rlctl's, so sub-commands are dispatched by name."""

    register_commands(app)
    return app


def export(cli: typer.Typer, *args: str):
    return CliRunner().invoke(cli, ["export", *args], env={"NO_COLOR": "1"})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runs/r/checkpoints/step_1 of a tiny model, as the trainer lays it out."""
    import torch.distributed.checkpoint as dcp

    run_dir = tmp_path_factory.mktemp("ckpt") / "runs" / "r"
    recipe = Recipe.model_validate({"model": {"path": "tiny", "dtype": "float32"}})
    manager = CheckpointManager(run_dir, durable=False)
    tmp = manager.begin(1)
    model = load_causal_lm(recipe.model, recipe.run.seed)
    dcp.save({"model": model.state_dict()}, checkpoint_id=str(tmp / "train" / "actor"))
    save_config_snapshot(tmp, recipe.model_dump(mode="json", by_alias=True))
    return manager.commit(tmp, 1)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (what must stay untouched)."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_new_directory_gets_a_marked_loadable_export(cli, checkpoint, tmp_path) -> None:
    out = tmp_path / "hf"
    result = export(cli, str(checkpoint), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert (out / EXPORT_MARKER).is_file()
    loaded = AutoModelForCausalLM.from_pretrained(out).state_dict()
    recipe = Recipe.model_validate({"model": {"path": "tiny", "dtype": "float32"}})
    saved = load_causal_lm(recipe.model, recipe.run.seed).state_dict()  # same seed, same model
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no partial or old left


def test_a_directory_of_the_user_is_refused_and_left_alone(cli, checkpoint, tmp_path) -> None:
    out = tmp_path / "models"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    # Names the old export code deleted on its way: they belong to the user too.
    for sibling in ("models.old", "models.partial"):
        (tmp_path / sibling).mkdir()
        (tmp_path / sibling / "keep.txt").write_text(sibling)
    before = tree(tmp_path)
    result = export(cli, str(checkpoint), "-o", str(out))
    assert result.exit_code == 2
    assert "not an rlctl export" in result.output and "--overwrite" in result.output
    assert "Traceback" not in result.output
    assert tree(tmp_path) == before

    forced = export(cli, str(checkpoint), "-o", str(out), "--overwrite")
    assert forced.exit_code == 0, forced.output
    assert (out / EXPORT_MARKER).is_file() and not (out / "notes.txt").exists()
    for sibling in ("models.old", "models.partial"):  # still not touched
        assert (tmp_path / sibling / "keep.txt").read_text() == sibling


def test_a_file_is_never_touched_even_with_overwrite(cli, checkpoint, tmp_path) -> None:
    target = tmp_path / "model.bin"
    target.write_bytes(b"weights")
    for extra in ([], ["--overwrite"]):
        result = export(cli, str(checkpoint), "-o", str(target), *extra)
        assert result.exit_code == 2, result.output
        assert "is a file" in result.output and "Traceback" not in result.output
        assert target.read_bytes() == b"weights"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]


def test_an_earlier_export_is_replaced(cli, checkpoint, tmp_path) -> None:
    out = tmp_path / "hf"
    assert export(cli, str(checkpoint), "-o", str(out)).exit_code == 0
    (out / "stale.txt").write_text("from the first export")
    again = export(cli, str(checkpoint), "-o", str(out))
    assert again.exit_code == 0, again.output
    assert not (out / "stale.txt").exists() and (out / EXPORT_MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_the_checkpoint_itself_is_never_the_target(cli, checkpoint) -> None:
    before = tree(checkpoint)
    for target in (checkpoint, checkpoint.parent, checkpoint / "hf"):
        result = export(cli, str(checkpoint), "-o", str(target), "--overwrite")
        assert result.exit_code == 2, result.output
        assert "overlaps the checkpoint" in result.output
    assert tree(checkpoint) == before


def test_export_errors_name_the_export_not_resume(cli, tmp_path) -> None:
    result = export(cli, str(tmp_path / "nope"), "-o", str(tmp_path / "hf"))
    assert result.exit_code == 2
    assert "rlctl export" in result.output and "--resume" not in result.output


def test_rules_of_the_target(tmp_path) -> None:
    check_export_target(tmp_path / "new")  # absent: fine
    (tmp_path / "empty").mkdir()
    check_export_target(tmp_path / "empty")  # empty: fine
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportTargetError, match="is a file"):
        check_export_target(tmp_path / "file" / "hf")  # below a file
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(ExportTargetError, match="symbolic link"):
        check_export_target(tmp_path / "link", overwrite=True)


def test_export_hf_refuses_before_writing_and_cleans_its_work_dir(tmp_path) -> None:
    recipe = Recipe.model_validate({"model": {"path": "tiny", "dtype": "float32"}})
    model = load_causal_lm(recipe.model, 0)
    out = tmp_path / "x"
    out.mkdir()
    (out / "a.txt").write_text("a")
    with pytest.raises(ExportTargetError):
        export_hf(model.state_dict(), model.config, None, out)
    assert sorted(os.listdir(tmp_path)) == ["x"] and os.listdir(out) == ["a.txt"]
    # a state dict that does not fit fails after the check: no work directory is left
    with pytest.raises(ValueError, match="does not match"):
        export_hf({"w": torch.zeros(1)}, model.config, None, tmp_path / "y")
    assert sorted(os.listdir(tmp_path)) == ["x"]
