"""``rlctl train RECIPE... [-s k=v] [--local] [--quiet] [--resume [PATH]]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from rlctl.cli.common import (
    EXIT_RUN_FAILURE,
    EXIT_USAGE,
    RecipeArgs,
    SetOption,
    fail,
    load_or_exit,
    say,
)

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
        typer.Option(
            "--force-resume", help="Resume even if the algorithm or model config changed."
        ),
    ] = False,
) -> None:
    """Validate a recipe, then train.

    Exit 0 when training completes, 1 when the run fails, 2 when the recipe has problems
    or the run directory is taken (another run is using it, or a fresh run would replace a
    previous run's results: use --resume or another run.name), 143 when stopped by SIGTERM.
    """
    overrides = list(overrides or [])
    if local:  # the one place --local applies: the loader then runs one rank per role
        overrides.append('resources.mode="local"')
    loaded = load_or_exit(recipes, overrides)
    _check_engine_env(loaded)
    try:
        from rlctl.run.entry import train_from_recipe
        from rlctl.run.preflight import preflight
    except ImportError as exc:
        fail(f"training is not available: {exc}",
             fix='install the training extras: pip install -e ".[train]"')
    resume_arg: str | bool | None = True if resume == RESUME_LATEST else resume
    checkpoint = checked_or_exit(preflight, loaded.recipe, resume_arg, force_resume)
    code = train_from_recipe(
        loaded, quiet=quiet,
        resume=str(checkpoint) if checkpoint is not None else None,
        force_resume=force_resume,
    )
    raise typer.Exit(int(code) if code is not None else EXIT_RUN_FAILURE)


def _check_engine_env(loaded: Any) -> None:
    """A server engine whose environment is not built: exit 2 with the command that builds it,
    before anything starts. (``config validate`` does not check this: a recipe is often
    validated on another machine than the one it runs on.)"""
    from rlctl.engines.rollout.server.engine_envs import install_command, missing_env_message

    backend = loaded.recipe.engines.rollout.backend
    problem = missing_env_message(backend, loaded.options_for("engines.rollout.options"))
    if problem:
        fail(f"engines.rollout.backend = {backend!r}: {problem}", code=EXIT_USAGE,
             fix=f"run `{install_command(backend)}`, or set [engines.rollout.options] python")


def checked_or_exit(preflight: Any, recipe: Any, resume: str | bool | None,
                    force_resume: bool) -> Any:
    """Run the pre-flight checks; exit 2 on bad input, 1 on a damaged checkpoint."""
    from rlctl.checkpoint import CheckpointDamaged, CheckpointManager
    from rlctl.config.problems import ConfigError, format_problems

    try:
        checked = preflight(recipe, resume=resume, force_resume=force_resume)
    except ConfigError as exc:
        say(format_problems(exc.problems))
        raise typer.Exit(EXIT_USAGE) from None
    except CheckpointDamaged as exc:
        damaged = exc.checkpoint
        root = damaged.parent if damaged is not None else (
            Path(recipe.run.output_dir) / recipe.run.name / "checkpoints")
        earlier = [c.path for c in CheckpointManager(root.parent).checkpoints()
                   if damaged is None or c.step < _step(damaged)]
        fix = "run without --resume to start afresh"
        if earlier:
            fix = f"resume from the one before: --resume {earlier[-1]}, or " + fix
        fail(f"cannot resume, the checkpoint is damaged: {exc}", fix=fix)
    for note in checked.notes:
        say(note)
    return checked.checkpoint


def _step(checkpoint: Path) -> int:
    from rlctl.checkpoint import read_manifest

    manifest = read_manifest(checkpoint) or {}
    return int(manifest.get("step", 0))
