"""``rlctl export`` of a hostile checkpoint ends in one line, never a hang or a traceback:
a FIFO where a file belongs, a model that needs its own code, a run that is still training
(issue 30). A real checkpoint of the tiny model is exported through the real command."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rlctl.checkpoint import CheckpointManager, save_config_snapshot
from rlctl.cli.runs_cmd import register_commands
from rlctl.config.recipe import Recipe
from rlctl.models.loading import load_causal_lm

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


def save_checkpoint(run_dir: Path, model: dict) -> Path:
    import torch.distributed.checkpoint as dcp

    recipe = Recipe.model_validate({"model": {"path": "tiny", "dtype": "float32"}})
    manager = CheckpointManager(run_dir, durable=False)
    tmp = manager.begin(1)
    weights = load_causal_lm(recipe.model, recipe.run.seed)
    dcp.save({"model": weights.state_dict()}, checkpoint_id=str(tmp / "train" / "actor"))
    snapshot = recipe.model_dump(mode="json", by_alias=True)
    snapshot["model"].update(model)
    save_config_snapshot(tmp, snapshot)
    return manager.commit(tmp, 1)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "runs" / "r", {})


@pytest.fixture
def run_dir(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the pristine run directory, to spoil."""
    copy = tmp_path / "runs" / "r"
    shutil.copytree(pristine.parents[1], copy)
    return copy


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def refused(result, code: int, *words: str) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, result.output
    out = result.output
    assert "Traceback" not in out and "hf.co" not in out and "huggingface.co" not in out, out
    assert out.startswith("error: ") and len(out.strip().splitlines()) == 1, out
    for word in words:
        assert word in out, out
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("spoil", "code", "words"), [
    ("checkpoints/step_1/config.json", 1, ("config.json is a FIFO (named pipe)",)),
    ("checkpoints/step_1/rollout.json", 1, ("rollout.json is not valid JSON",
                                            "is a FIFO (named pipe), not a file")),
    ("checkpoints/step_1/COMPLETE", 2, ("no complete checkpoint",)),
    ("checkpoints/latest", 0, ()),  # a pointer that cannot be read: the newest step is used
])
def test_a_fifo_in_a_checkpoint_is_refused_at_once(cli, run_dir, tmp_path, spoil, code, words):
    fifo(run_dir / spoil)
    out = tmp_path / "hf"
    result = export(cli, str(run_dir), "-o", str(out))
    if code == 0:
        assert result.exit_code == 0, result.output
        return
    refused(result, code, *words)
    assert not out.exists()


@pytest.mark.timeout(60)
def test_a_fifo_in_the_model_directory_is_refused(cli, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    os.mkfifo(model / "tokenizer.json")
    ckpt = save_checkpoint(tmp_path / "runs" / "r", {"path": str(model)})
    refused(export(cli, str(ckpt), "-o", str(tmp_path / "hf")), 2,
            "tokenizer.json is a FIFO (named pipe), not a file")
    assert not (tmp_path / "hf").exists()


@pytest.mark.timeout(60)
def test_a_checkpoint_of_a_custom_code_model_is_refused_in_one_line(cli, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "model_type": "evil", "auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilLM"}}))
    (model / "modeling_evil.py").write_text("raise SystemExit('model code ran')\n")
    ckpt = save_checkpoint(tmp_path / "runs" / "r", {"path": str(model),
                                                      "trust_remote_code": True})
    out = refused(export(cli, str(ckpt), "-o", str(tmp_path / "hf")), 2,
                  "needs its own Python code (config.json maps AutoModelForCausalLM to it)",
                  "rlctl runs no model code")
    assert str(model) in out
    assert not (tmp_path / "hf").exists()


@pytest.mark.timeout(60)
def test_an_unknown_model_type_is_one_line_without_a_hub_url(cli, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    ckpt = save_checkpoint(tmp_path / "runs" / "r", {"path": str(model)})
    refused(export(cli, str(ckpt), "-o", str(tmp_path / "hf")), 2, "cannot rebuild its model")


def test_export_of_a_run_still_training_says_so(cli, run_dir, tmp_path):
    from rlctl.run.run_lock import RunLock

    lock = RunLock.acquire(run_dir)  # the run is training
    try:
        for target in (run_dir, run_dir / "checkpoints", run_dir / "checkpoints" / "step_1"):
            out = refused(export(cli, str(target), "-o", str(tmp_path / "hf")), 2,
                          f"the run in {run_dir} is still training (pid {os.getpid()}",
                          "wait for it to finish")
            assert "damaged" not in out
    finally:
        lock.release()
    assert export(cli, str(run_dir), "-o", str(tmp_path / "hf")).exit_code == 0
