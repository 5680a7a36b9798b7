"""The root ``rlctl`` command: built-in sub-commands plus those plugins add.

Plugins add commands through the ``register_commands(cli)`` hook; each plugin's hook runs on
its own so that one that raises is recorded (``rlctl plugins list`` shows it) and the CLI
still starts.
"""

from __future__ import annotations

from typing import Annotated

import typer

from rlctl.cli.config_cmd import config_app
from rlctl.cli.plugins_cmd import plugins_app
from rlctl.cli.train_cmd import ResumeOptionalValue, train

HELP = (
    "rlctl: RL post-training of LLMs (PPO, GRPO and friends) from one typed TOML recipe.\n\n"
    "Start with `rlctl config validate RECIPE` and `rlctl train RECIPE`."
)


def _version(value: bool) -> None:
    if value:
        from rlctl import __version__

        typer.echo(f"rlctl {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool | None,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = None,
) -> None:
    """rlctl: RL post-training of LLMs from one typed TOML recipe."""


def build_app(*, plugin_commands: bool = True) -> typer.Typer:
    """A fresh CLI; ``plugin_commands=False`` leaves out commands that plugins add."""
    app = typer.Typer(
        name="rlctl",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    app.add_typer(config_app)
    app.add_typer(plugins_app)
    app.command("train", cls=ResumeOptionalValue)(train)
    if plugin_commands:
        add_plugin_commands(app)
    return app


def add_plugin_commands(app: typer.Typer) -> None:
    """Run every plugin's ``register_commands`` hook, isolating failures."""
    from rlctl.registry import PluginFailure, get_registry

    registry = get_registry()
    for outcome in registry.call_each("register_commands", cli=app):
        if outcome.error is not None:  # a broken plugin must not break the CLI
            error = outcome.error
            registry.record_failure(
                PluginFailure(outcome.plugin, outcome.plugin,
                              f"register_commands raised {type(error).__name__}: {error}")
            )


def main() -> None:
    """Console-script entry point (``rlctl``)."""
    build_app()()
