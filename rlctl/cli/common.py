"""What every command shares: exit codes, stderr messages, recipe loading with error reporting.

Machine output (TOML, JSON, tables a script may parse) goes to stdout; human messages
(problems, notes, progress) go to stderr, so ``rlctl config show x.toml > y.toml`` stays clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from rlctl.config.problems import ConfigError, format_problems

EXIT_OK = 0
EXIT_RUN_FAILURE = 1
EXIT_USAGE = 2  # usage or config error (the code click uses for usage errors)

RecipeArgs = Annotated[
    list[Path],
    typer.Argument(
        help="Recipe TOML files; later files override earlier ones (deep merge).",
        metavar="RECIPE",
        show_default=False,
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="Override one key, e.g. -s algorithm.kl.coef=0.01 (value parsed as TOML; a bare "
        "word is a string), or unset it: -s ~algorithm.kl.coef. Beats RLCTL_* env vars and "
        "recipe files.",
        metavar="KEY=VALUE",
        show_default=False,
    ),
]


def say(message: str) -> None:
    """A human message on stderr."""
    typer.echo(message, err=True)


def fail(message: str, *, code: int = EXIT_RUN_FAILURE, fix: str = "") -> NoReturn:
    """Print ``error: message`` (and a fix) on stderr and exit with ``code``."""
    say(f"error: {message}" + (f"\n  fix: {fix}" if fix else ""))
    raise typer.Exit(code)


def load_or_exit(paths: Sequence[Path], overrides: Sequence[str] | None):  # type: ignore[no-untyped-def]
    """Load and validate a recipe; on problems print them all and exit 2 (no traceback)."""
    from rlctl.config.pipeline import load_recipe
    from rlctl.registry import get_registry

    # a plugin that failed to load may be why a name is unknown: say so up front
    for failure in get_registry().failures:
        say(f"warning: plugin {failure.name} failed to load: {failure.error} "
            "(see `rlctl plugins list`)")
    try:
        return load_recipe(list(paths), list(overrides or ()))
    except ConfigError as exc:
        say(format_problems(exc.problems))
        raise typer.Exit(EXIT_USAGE) from None
