"""``rlctl train``: validation first, clear refusals, ``--resume [PATH]`` parsing.

Training itself is tested with the trainer (tests/trainer); here only what the command
decides before handing over.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlctl.cli.app import build_app
from rlctl.cli.train_cmd import RESUME_LATEST
from tests.cli.cli_helpers import DATA, ROOT


def test_train_refuses_a_bad_recipe_with_exit_2(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("train", str(DATA / "bad.toml"), code=2)
    assert "error: the recipe has 7 problems:" in result.stderr
    assert "Traceback" not in result.stderr


def _parsed(args: list[str]) -> dict:
    """The parameters `rlctl train` would receive for ``args`` (parsed, not run)."""
    import typer

    command = typer.main.get_command(build_app(plugin_commands=False))
    train = command.commands["train"]  # type: ignore[attr-defined]
    ctx = train.make_context("train", list(args))
    return dict(ctx.params)


@pytest.mark.parametrize(
    ("args", "resume", "recipes"),
    [
        (["r.toml"], None, ["r.toml"]),
        (["r.toml", "--resume"], RESUME_LATEST, ["r.toml"]),
        (["--resume", "r.toml"], RESUME_LATEST, ["r.toml"]),
        (["r.toml", "--resume", "--local"], RESUME_LATEST, ["r.toml"]),
        (["r.toml", "--resume", "runs/x/checkpoints/step_10"], "runs/x/checkpoints/step_10",
         ["r.toml"]),
        (["--resume=runs/x", "a.toml", "b.toml"], "runs/x", ["a.toml", "b.toml"]),
    ],
)
def test_resume_takes_an_optional_path(args: list[str], resume: str | None,
                                       recipes: list[str]) -> None:
    params = _parsed(args)
    assert params["resume"] == resume
    assert [str(p) for p in params["recipes"]] == recipes


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def test_a_fresh_run_into_a_previous_run_is_refused_and_changes_nothing(rlctl, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "small"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "critic/score/mean": 0.5}\n')
    (run_dir / "config.toml").write_text("# the previous run's config\n")
    (run_dir / "run_info.json").write_text("{}\n")
    before = _tree(tmp_path)
    result = rlctl("train", str(DATA / "small.toml"), "--local", "-s",
                   f'run.output_dir="{tmp_path}"', code=2)
    assert f"run directory {run_dir} already holds a run (metrics.jsonl)" in result.stderr
    assert "--resume" in result.stderr and "run.name" in result.stderr
    assert "Traceback" not in result.stderr
    assert _tree(tmp_path) == before


def test_a_run_directory_in_use_is_refused_naming_the_holder(rlctl, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "small"
    run_dir.mkdir()
    code = ("import sys; from pathlib import Path; "
            "from rlctl.run.run_lock import RunLock; "
            "RunLock.acquire(Path(sys.argv[1])); print('locked', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = rlctl("train", str(DATA / "small.toml"), "--local", "-s",
                       f'run.output_dir="{tmp_path}"', code=2)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert f"run directory {run_dir} is in use by another run (pid {holder.pid} on host" in (
        result.stderr)
    assert sorted(os.listdir(run_dir)) == [".rlctl.lock"]  # the holder's, untouched


def test_error_text_is_printed_verbatim_not_as_markup(rlctl, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Rich markup in a message: "[data]" used to vanish and "[/x]" to crash the reporter."""
    out = tmp_path / "[data]" / "a[/x]b"
    out.mkdir(parents=True)
    (out / "small").write_text("a file where the run directory should be")
    result = rlctl("train", str(DATA / "small.toml"), "--local", "-s", f'run.output_dir="{out}"',
                   code=2)
    assert f"error: run directory {out / 'small'} is a file" in result.stderr
    assert "MarkupError" not in result.stderr
