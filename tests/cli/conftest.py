"""CLI test helpers: run ``rlctl`` in-process (typer's runner) with a clean environment.

The top-level conftest fixed the terminal width and colour before typer was imported, so
help texts are stable. Tests run from the repository root so that relative recipe paths
(and the sources they are reported from) read the same on every machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from typer.testing import Result

from rlctl.cli.app import build_app
from rlctl.hookspecs import hookimpl
from rlctl.registry import PLUGINS_ENV, build_registry, reset_registry, set_registry
from tests.cli.cli_helpers import ROOT, invoke


@pytest.fixture(scope="module", autouse=True)
def _builtin_plugins_only() -> Iterator[None]:
    """In-process CLI tests see built-ins only, so their output does not depend on which
    third-party plugins happen to be installed (subprocess tests cover entry points).
    Module scope: the setting ends with the CLI tests instead of leaking into later ones."""
    saved = os.environ.get(PLUGINS_ENV)
    os.environ[PLUGINS_ENV] = "none"
    reset_registry()
    yield
    if saved is None:
        os.environ.pop(PLUGINS_ENV, None)
    else:
        os.environ[PLUGINS_ENV] = saved
    reset_registry()


@pytest.fixture(autouse=True)
def _repo_root_and_clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RLCTL_") and name != PLUGINS_ENV:
            monkeypatch.delenv(name)  # a developer's RLCTL_* must not leak into results
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def app():  # type: ignore[no-untyped-def]
    return build_app()


@pytest.fixture
def rlctl(app) -> Callable[..., Result]:  # type: ignore[no-untyped-def]
    """rlctl("config", "validate", path, code=0) -> Result with .stdout and .stderr."""

    def _run(*args: str, code: int = 0) -> Result:
        return invoke(app, list(args), code)

    return _run


class ExtraEnginesPlugin:
    """An in-process plugin: the built-in ``hf`` engine under a second name (a lazy target)."""

    @hookimpl
    def register_rollout_engines(self, register) -> None:  # type: ignore[no-untyped-def]
        register("hf-copy", "rlctl.engines.rollout.hf.engine:HFRolloutEngine",
                 description="the hf engine under another name")


class NoTargetPlugin:
    """Registers a name without an implementation: the registry refuses the whole plugin."""

    @hookimpl
    def register_rollout_engines(self, register) -> None:  # type: ignore[no-untyped-def]
        register("planned", None, description="announced, not implemented yet")


@pytest.fixture
def extra_plugins() -> Iterator[None]:
    """The built-ins plus :class:`ExtraEnginesPlugin` and :class:`NoTargetPlugin`."""
    set_registry(build_registry(external="none", extra=[ExtraEnginesPlugin(), NoTargetPlugin()]))
    yield
    reset_registry()
