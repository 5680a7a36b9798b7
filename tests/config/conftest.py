"""Helpers of the config tests: recipe files in a temporary directory, loaded for real."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from rlctl.config.loaded import LoadedRecipe
from rlctl.config.pipeline import load_recipe
from rlctl.config.problems import ConfigError, ConfigProblem
from rlctl.registry import Registry, build_registry


@pytest.fixture(scope="session")
def registry() -> Registry:
    """Built-in plugins only, so an installed third-party plugin cannot change the results."""
    return build_registry(external="none")


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    def _write(text: str, name: str = "recipe.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def load(write: Callable[..., Path], registry: Registry) -> Callable[..., LoadedRecipe]:
    """load(*texts, overrides=(), env={}): each text becomes a file, loaded in order."""

    def _load(
        *texts: str, overrides: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> LoadedRecipe:
        paths = [write(t, f"r{i}.toml") for i, t in enumerate(texts)]
        return load_recipe(paths, overrides, env or {}, registry=registry)

    return _load


@pytest.fixture
def problems(load: Callable[..., LoadedRecipe]) -> Callable[..., list[ConfigProblem]]:
    """problems(*texts, ...): the problems loading raises (fails if it loads)."""

    def _problems(*texts: str, **kw: object) -> list[ConfigProblem]:
        with pytest.raises(ConfigError) as err:
            load(*texts, **kw)
        return err.value.problems

    return _problems
