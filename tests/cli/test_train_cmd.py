"""``rlctl train``: validation first, clear refusals, ``--resume [PATH]`` parsing.

Training itself is tested with the trainer (tests/trainer); here only what the command
decides before handing over.
"""

from __future__ import annotations

import pytest
from cli_helpers import DATA

from rlctl.cli.app import build_app
from rlctl.cli.train_cmd import RESUME_LATEST


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
