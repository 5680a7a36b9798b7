"""Shared by the CLI tests (a module with a unique name: every test directory has a
``conftest.py``, so ``from conftest import ...`` would be ambiguous)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("tests/cli/recipes")  # relative to ROOT (the tests run from there)


def invoke(app, args: list[str], code: int) -> Result:  # type: ignore[no-untyped-def]
    # plain help wraps at min(COLUMNS, 80): pin COLUMNS so the terminal running the tests
    # does not matter (set here, not globally, to leave other tests' rich consoles alone)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a crash is a bug: show its traceback
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result
