"""``train --resume`` and ``export`` check the checkpoint before anything starts.

No checkpoint, a bad path or a resume that changes the math: exit 2, nothing written. A
checkpoint marked complete whose files do not match (cut short, garbage, crafted): exit 1,
one line naming the file and a fix naming the checkpoint before it; a crafted index never
runs its command. The checkpoints are real DCP saves of the tiny model, written by
:class:`CheckpointManager` as the trainer does.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from rlctl.checkpoint import CheckpointManager, TrainerState, save_config_snapshot
from rlctl.config.pipeline import load_recipe
from rlctl.run.checkpointing import resolved_config
from rlctl.run.preflight import preflight

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")

RECIPE = """
[run]
name = "r"
output_dir = "{out}"
device = "cpu"
[model]
path = "tiny"
dtype = "float32"
[data]
task = "count_digits"
[algorithm]
prompts_per_step = 2
group_size = 2
[[rewards]]
name = "digits_match"
[engines.train]
ranks = 1
micro_batch_size = 4
[data_plane]
backend = "memory"
[resources]
mode = "local"
[schedule]
total_steps = 4
[logging]
sinks = ["jsonl"]
progress = false
"""


class _Shell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (self.command,))


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """(recipe path, run dir) with complete checkpoints step_1 and step_2."""
    import torch.distributed.checkpoint as dcp

    from rlctl.models.tiny import build_tiny_model

    recipe_path = tmp_path / "r.toml"
    recipe_path.write_text(RECIPE.format(out=tmp_path / "runs"))
    recipe = load_recipe([recipe_path], env={}).recipe
    run_dir = tmp_path / "runs" / "r"
    manager = CheckpointManager(run_dir, durable=False)
    for step in (1, 2):
        tmp = manager.begin(step)
        model = build_tiny_model(recipe.model.tiny, step)
        dcp.save({"model": model.state_dict()}, checkpoint_id=tmp / "train" / "actor")
        save_config_snapshot(tmp, resolved_config(recipe))
        TrainerState(step=step).save(tmp)
        (tmp / "rollout.json").write_text("[{}]")
        manager.commit(tmp, step)
    return recipe_path, run_dir


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _crafted_index(ckpt: Path, marker: Path) -> None:
    index = ckpt / "train" / "actor" / ".metadata"
    index.write_bytes(pickle.dumps(_Shell(f"touch {marker}")))
    manifest = json.loads((ckpt / "COMPLETE").read_text())
    manifest["files"]["train/actor/.metadata"] = index.stat().st_size  # sizes match: crafted
    (ckpt / "COMPLETE").write_text(json.dumps(manifest))


def _cut_shard(ckpt: Path) -> Path:
    (shard,) = (ckpt / "train" / "actor").glob("*.distcp")
    shard.write_bytes(shard.read_bytes()[:100])
    return shard


@pytest.mark.parametrize(
    ("resume", "message"),
    [
        (["--resume"], ("--resume: no complete checkpoint under {fresh}/checkpoints: "
                        "nothing to resume")),
        (["--resume", "{tmp}/nowhere"], "--resume {tmp}/nowhere: no such file or directory"),
        (["--resume", "{run}/checkpoints/latest"], "not a checkpoint (no COMPLETE marker)"),
        (["--resume", "{run}/checkpoints/step_9"], "no such file or directory"),
    ],
    ids=["nothing to resume", "no such path", "a file", "no such step"],
)
def test_nothing_to_resume_is_exit_2_before_anything_starts(
    rlctl, run, tmp_path, resume: list[str], message: str
) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = run
    fresh = tmp_path / "runs" / "fresh"
    args = [a.format(tmp=tmp_path, run=run_dir) for a in resume]
    before = _tree(tmp_path / "runs")
    result = rlctl("train", str(recipe), "-s", "run.name=fresh", *args, code=2)
    assert message.format(tmp=tmp_path, fresh=fresh, run=run_dir) in result.stderr
    assert "fix: run without --resume to start afresh" in result.stderr
    assert "Traceback" not in result.stderr
    assert not fresh.exists()
    assert _tree(tmp_path / "runs") == before


def test_an_incomplete_checkpoint_given_by_path_is_exit_2(rlctl, run) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = run
    (run_dir / "checkpoints" / "step_2" / "COMPLETE").unlink()
    result = rlctl("train", str(recipe), "--resume", str(run_dir / "checkpoints" / "step_2"),
                   code=2)
    assert "this checkpoint is incomplete (no COMPLETE marker)" in result.stderr
    assert "(complete: step_1)" in result.stderr


def test_a_resume_that_changes_the_math_is_exit_2_with_the_key(rlctl, run) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = run
    before = _tree(run_dir)
    result = rlctl("train", str(recipe), "--resume", "-s", "algorithm.optim.lr=0.5", code=2)
    assert "\n  algorithm.optim.lr: the checkpoint was trained with 1e-06, this recipe says " \
           "0.5" in result.stderr
    assert "--force-resume" in result.stderr
    assert _tree(run_dir) == before  # config.toml, run_info.json, metrics: none written


@pytest.mark.parametrize("how", ["latest", "run dir", "step dir"])
def test_a_damaged_checkpoint_is_one_line_and_exit_1(rlctl, run, how: str) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = run
    shard = _cut_shard(run_dir / "checkpoints" / "step_2")
    resume = {"latest": [], "run dir": [str(run_dir)],
              "step dir": [str(run_dir / "checkpoints" / "step_2")]}[how]
    before = _tree(run_dir)
    result = rlctl("train", str(recipe), "--resume", *resume, code=1)
    lines = result.stderr.splitlines()
    assert lines[-2] == (f"error: cannot resume, the checkpoint is damaged: {shard} has 100 "
                         f"bytes but COMPLETE records {_recorded(shard)}: it was cut short after "
                         "the save")
    assert lines[-1] == (f"  fix: resume from the one before: --resume "
                         f"{run_dir / 'checkpoints' / 'step_1'}, or run without --resume to "
                         "start afresh")
    assert "Traceback" not in result.stderr
    assert _tree(run_dir) == before


def test_a_crafted_checkpoint_never_runs_its_command(rlctl, run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    recipe, run_dir = run
    marker = tmp_path / "PWNED"
    _crafted_index(run_dir / "checkpoints" / "step_2", marker)
    result = rlctl("train", str(recipe), "--resume", code=1)
    assert "refusing to load posix.system" in result.stderr
    result = rlctl("export", str(run_dir), "-o", str(tmp_path / "hf"), code=1)
    assert "refusing to load posix.system" in result.stderr
    assert not marker.exists()
    assert not (tmp_path / "hf").exists()


def test_export_of_a_damaged_checkpoint_is_exit_1(rlctl, run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, run_dir = run
    shard = _cut_shard(run_dir / "checkpoints" / "step_2")
    result = rlctl("export", str(run_dir), "-o", str(tmp_path / "hf"), code=1)
    assert result.stderr == (f"error: the checkpoint is damaged: {shard} has 100 bytes but "
                             f"COMPLETE records {_recorded(shard)}: it was cut short after the "
                             "save\n")
    assert not (tmp_path / "hf").exists()


def test_latest_incomplete_resumes_the_one_before_and_says_so(run) -> None:  # type: ignore[no-untyped-def]
    recipe_path, run_dir = run
    (run_dir / "checkpoints" / "step_2" / "COMPLETE").unlink()  # an interrupted save
    recipe = load_recipe([recipe_path], env={}).recipe
    checked = preflight(recipe, resume=True)
    assert checked.checkpoint == run_dir / "checkpoints" / "step_1"
    assert checked.notes == [
        (f"note: {run_dir / 'checkpoints' / 'latest'} names step_2, which is incomplete (an "
         "interrupted save): using step_1"),
        f"resuming from {run_dir / 'checkpoints' / 'step_1'}",
    ]


def test_force_resume_accepts_changed_math(run) -> None:  # type: ignore[no-untyped-def]
    recipe_path, run_dir = run
    recipe = load_recipe([recipe_path], ["algorithm.optim.lr=0.5"], env={}).recipe
    checked = preflight(recipe, resume=str(run_dir), force_resume=True)
    assert checked.checkpoint == run_dir / "checkpoints" / "step_2"


def _recorded(shard: Path) -> int:
    ckpt = shard.parents[2]
    return json.loads((ckpt / "COMPLETE").read_text())["files"][
        str(shard.relative_to(ckpt))]
