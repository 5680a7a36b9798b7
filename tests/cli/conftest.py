"""CLI test helpers: run ``rlctl`` in-process (typer's runner) with a clean environment.

The top-level conftest fixed the terminal width and colour before typer was imported, so
help texts are stable. Tests run from the repository root so that relative recipe paths
(and the sources they are reported from) read the same on every machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rlctl.cli.app import build_app

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("tests/cli/recipes")  # relative to ROOT


@pytest.fixture(autouse=True)
def _repo_root_and_clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RLCTL_"):  # a developer's RLCTL_* must not leak into results
            monkeypatch.delenv(name)
    monkeypatch.chdir(ROOT)


def invoke(app, args: list[str], code: int) -> Result:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a crash is a bug: show its traceback
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def app():  # type: ignore[no-untyped-def]
    return build_app()


@pytest.fixture
def rlctl(app) -> Callable[..., Result]:  # type: ignore[no-untyped-def]
    """rlctl("config", "validate", path, code=0) -> Result with .stdout and .stderr."""

    def _run(*args: str, code: int = 0) -> Result:
        return invoke(app, list(args), code)

    return _run
