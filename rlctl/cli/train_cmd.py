"""``rlctl train RECIPE... [-s k=v] [--local] [--quiet] [--resume [PATH]]``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from rlctl.cli.common import EXIT_RUN_FAILURE, RecipeArgs, SetOption, fail, load_or_exit

RESUME_LATEST = "latest"


class ResumeOptionalValue(TyperCommand):
    """Lets ``--resume`` stand alone (resume the latest checkpoint) or take a PATH.

    Typer options cannot have an optional value, so a bare ``--resume`` (last argument,
    followed by another option, or followed by a ``.toml`` recipe) gets ``latest`` inserted.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        fixed: list[str] = []
        for i, arg in enumerate(args):
            fixed.append(arg)
            if arg == "--resume":
                nxt = args[i + 1] if i + 1 < len(args) else None
                if nxt is None or nxt.startswith("-") or nxt.endswith(".toml"):
                    fixed.append(RESUME_LATEST)
        return super().parse_args(ctx, fixed)


def train(
    recipes: RecipeArgs,
    overrides: SetOption = None,
    local: Annotated[
        bool,
        typer.Option("--local", help='Run every role in this process (resources.mode = "local").'),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Resume from the run's latest checkpoint (bare --resume) or from PATH.",
            metavar="[PATH]",
            show_default=False,
        ),
    ] = None,
    force_resume: Annotated[
        bool,
        typer.Option("--force-resume", help="Resume even if the algorithm or model config changed."),
    ] = False,
) -> None:
    """Validate a recipe, then train.

    Exit 0 when training completes, 1 when the run fails, 2 when the recipe has problems.
    """
    overrides = list(overrides or [])
    if local:  # the one place --local applies: the loader then runs one rank per role
        overrides.append('resources.mode="local"')
    loaded = load_or_exit(recipes, overrides)
    try:
        from rlctl.trainer.controller.entry import train_from_recipe
    except ImportError as exc:
        fail(f"training is not available: {exc}",
             fix='install the training extras: pip install -e ".[train]"')
    resume_arg: str | bool | None = True if resume == RESUME_LATEST else resume
    code = train_from_recipe(loaded, quiet=quiet, resume=resume_arg, force_resume=force_resume)
    raise typer.Exit(int(code) if code is not None else EXIT_RUN_FAILURE)
