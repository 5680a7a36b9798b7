"""Snapshots of ``--help`` of every built-in command (regenerate: --inline-snapshot=fix)."""

from __future__ import annotations

import pytest
from inline_snapshot import snapshot

from rlctl.cli.app import build_app
from rlctl.hookspecs import hookimpl
from rlctl.registry import get_registry
from tests.cli.cli_helpers import invoke


@pytest.fixture(scope="module")
def core_app():  # type: ignore[no-untyped-def]
    """The CLI without plugin commands: its help does not change when plugins are added."""
    return build_app(plugin_commands=False)


def help_of(app, *command: str) -> str:  # type: ignore[no-untyped-def]
    return invoke(app, [*command, "--help"], 0).stdout


def test_root_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app) == snapshot("""\
Usage: rlctl [OPTIONS] COMMAND [ARGS]...

  rlctl: RL post-training of LLMs (PPO, GRPO and friends) from one typed TOML
  recipe.

  Start with `rlctl config validate RECIPE` and `rlctl train RECIPE`.

Options:
  --version  Print the version and exit.
  --help     Show this message and exit.

Commands:
  train    Validate a recipe, then train.
  config   Validate, show and describe recipes; migrate verl configs.
  plugins  Inspect built-in and third-party plugins.
""")


def test_no_arguments_prints_help_and_exits_2(core_app) -> None:  # type: ignore[no-untyped-def]
    result = invoke(core_app, [], 2)
    assert "Usage: rlctl [OPTIONS] COMMAND [ARGS]..." in result.stdout + result.stderr


def test_config_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "config") == snapshot("""\
Usage: rlctl config [OPTIONS] COMMAND [ARGS]...

  Validate, show and describe recipes; migrate verl configs.

Options:
  --help  Show this message and exit.

Commands:
  validate  Check recipes and report every problem.
  show      Print the resolved recipe, its derived numbers, step plan and...
  schema    Print the recipe's JSON Schema, plugin options included.
  migrate   Turn a verl config plus the overrides of its launch script into...
""")


def test_config_validate_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "config", "validate") == snapshot("""\
Usage: rlctl config validate [OPTIONS] {RECIPE}...

  Check recipes and report every problem.

  Exit 0 with a one-line summary, or exit 2 listing each problem: its key path,
  what is wrong and how to fix it. The data files are opened too, unless --skip-
  data.

Arguments:
  RECIPE <list[Path]>  Recipe TOML files; later files override earlier ones
                       (deep merge).  [required]

Options:
  -s, --set KEY=VALUE  Override one key, e.g. -s algorithm.kl.coef=0.01 (value
                       parsed as TOML; a bare word is a string), or unset it: -s
                       ~algorithm.kl.coef. Beats RLCTL_* env vars and recipe
                       files.
  --skip-data          Do not open data.train / data.val (a recipe for another
                       machine, whose files are not here); `train` still checks
                       them.
  --help               Show this message and exit.
""")


def test_config_show_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "config", "show") == snapshot("""\
Usage: rlctl config show [OPTIONS] {RECIPE}...

  Print the resolved recipe, its derived numbers, step plan and placement.

  Defaults are filled in; the TOML output is itself a valid recipe, with the
  derived batch numbers, the step plan (what runs, and why) and the placement
  plan (every worker's node and devices, Ray mode) as trailing comments.

Arguments:
  RECIPE <list[Path]>  Recipe TOML files; later files override earlier ones
                       (deep merge).  [required]

Options:
  -s, --set KEY=VALUE       Override one key, e.g. -s algorithm.kl.coef=0.01
                            (value parsed as TOML; a bare word is a string), or
                            unset it: -s ~algorithm.kl.coef. Beats RLCTL_* env
                            vars and recipe files.
  -f, --format <toml|json>  Output format.  [default: toml]
  --sources                 Say where each value came from (default, file, env,
                            -s).
  --help                    Show this message and exit.
""")


def test_config_schema_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "config", "schema") == snapshot("""\
Usage: rlctl config schema [OPTIONS]

  Print the recipe's JSON Schema, plugin options included.

  Point a TOML language server (Taplo, tombi) at it for completion and checks.

Options:
  -o, --output <path>  Write the schema to this file instead of stdout.
  --help               Show this message and exit.
""")


def test_plugins_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "plugins") == snapshot("""\
Usage: rlctl plugins [OPTIONS] COMMAND [ARGS]...

  Inspect built-in and third-party plugins.

Options:
  --help  Show this message and exit.

Commands:
  list  List plugins, what they registered, and failures.
""")


def test_plugins_list_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "plugins", "list") == snapshot("""\
Usage: rlctl plugins list [OPTIONS]

  List plugins, what they registered, and failures.

  Each plugin shows its distribution, version and module.

Options:
  --json   Print JSON.
  --check  Also check that every registered module:attr target exists (without
           importing it); exit 1 if one is broken or a plugin failed to load.
  --help   Show this message and exit.
""")


def test_train_help(core_app) -> None:  # type: ignore[no-untyped-def]
    assert help_of(core_app, "train") == snapshot("""\
Usage: rlctl train [OPTIONS] {RECIPE}...

  Validate a recipe, then train.

  Exit 0 when training completes, 1 when the run fails, 2 when the recipe has
  problems or the run directory is taken (another run is using it, or a fresh
  run would replace a previous run's results: use --resume or another run.name),
  143 when stopped by SIGTERM.

Arguments:
  RECIPE <list[Path]>  Recipe TOML files; later files override earlier ones
                       (deep merge).  [required]

Options:
  -s, --set KEY=VALUE  Override one key, e.g. -s algorithm.kl.coef=0.01 (value
                       parsed as TOML; a bare word is a string), or unset it: -s
                       ~algorithm.kl.coef. Beats RLCTL_* env vars and recipe
                       files.
  --local              Run every role in this process (resources.mode =
                       "local").
  -q, --quiet          No progress bar.
  --resume [PATH]      Resume from the run's latest checkpoint (bare --resume)
                       or from PATH.
  --force-resume       Resume even if the algorithm or model config changed.
  --help               Show this message and exit.
""")


def test_version(core_app) -> None:  # type: ignore[no-untyped-def]
    from rlctl import __version__

    assert invoke(core_app, ["--version"], 0).stdout == f"rlctl {__version__}\n"


class _HelloCommand:
    @hookimpl
    def register_commands(self, cli):  # type: ignore[no-untyped-def]
        @cli.command("hello")
        def hello(name: str = "world") -> None:
            """Say hello (a command added by a plugin)."""
            print(f"hello {name}")


class _BrokenCommand:
    @hookimpl
    def register_commands(self, cli):  # type: ignore[no-untyped-def]
        raise RuntimeError("cannot add my command")


def test_plugin_commands_are_added_and_a_broken_one_is_reported() -> None:
    registry = get_registry()
    registry.pm.register(_HelloCommand(), name="hello-plugin")
    registry.pm.register(_BrokenCommand(), name="broken-command-plugin")
    try:
        app = build_app()
        assert "hello" in help_of(app)
        assert invoke(app, ["hello", "--name", "rlctl"], 0).stdout == "hello rlctl\n"
        failures = [f for f in registry.failures if f.name == "broken-command-plugin"]
        assert [f.error for f in failures] == [
            "register_commands raised RuntimeError: cannot add my command"]
        listed = invoke(app, ["plugins", "list"], 0).stdout
        assert "broken-command-plugin (broken-command-plugin): register_commands raised" in listed
    finally:
        registry.pm.unregister(name="hello-plugin")
        registry.pm.unregister(name="broken-command-plugin")
        registry.failures[:] = [
            f for f in registry.failures if f.name != "broken-command-plugin"]


def test_cli_reference_is_up_to_date() -> None:
    from rlctl.cli.reference import render_cli_reference
    from tests.cli.cli_helpers import ROOT

    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == render_cli_reference(), (
        "docs/cli.md is stale: run  python -m rlctl.cli.reference > docs/cli.md")


def test_usage_errors_are_exit_2_with_a_hint(core_app) -> None:  # type: ignore[no-untyped-def]
    missing = invoke(core_app, ["config", "validate"], 2)
    assert missing.stderr == snapshot("""\
Usage: rlctl config validate [OPTIONS] {RECIPE}...
Try 'rlctl config validate --help' for help.

Error: Missing argument 'RECIPE'.
""")
    typo = invoke(core_app, ["config", "vaildate", "x.toml"], 2)
    assert typo.stderr.endswith("Error: No such command 'vaildate'. Did you mean 'validate'?\n")
