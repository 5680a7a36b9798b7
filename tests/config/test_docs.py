"""Docs that must follow the code: field descriptions, the generated reference, hooks."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from rlctl import hookspecs
from rlctl.config.recipe import Recipe
from rlctl.config.reference import render_reference
from rlctl.registry import Registry
from tests.config.config_helpers import ROOT


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    seen.add(model)
    for info in model.model_fields.values():
        for tp in [info.annotation, *typing.get_args(info.annotation)]:
            if isinstance(tp, type) and issubclass(tp, BaseModel) and tp not in seen:
                _models(tp, seen)


def _all_sections() -> list[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    _models(Recipe, seen)
    return sorted(seen, key=lambda m: m.__name__)


@pytest.mark.parametrize("model", _all_sections(), ids=lambda m: m.__name__)
def test_every_field_of_every_section_has_a_description(model: type[BaseModel]) -> None:
    missing = [n for n, info in model.model_fields.items() if not (info.description or "").strip()]
    assert missing == [], f"{model.__name__}: add a docstring under {missing}"


def test_every_registered_option_model_field_has_a_description(registry: Registry) -> None:
    missing = [
        f"{kind}:{reg.name}.{field}"
        for kind in registry.kinds() for reg in registry.all(kind) if reg.options is not None
        for field, info in reg.options.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert missing == []


def test_config_reference_is_up_to_date(registry: Registry) -> None:
    current = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert current == render_reference(registry), (
        "docs/config.md is stale: run  python -m rlctl.config.reference > docs/config.md")


def _hookspecs() -> list[str]:
    return [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(fn, "rlctl_spec")]


def test_every_hook_is_documented_in_plugins_md() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert len(_hookspecs()) >= 14
    undocumented = [name for name in _hookspecs() if f"### `{name}`" not in text]
    assert undocumented == []


def test_docs_index_links_the_other_pages() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in ("config.md", "plugins.md"):
        assert f"]({page})" in text
        assert (ROOT / "docs" / page).exists()
    assert "rlctl train recipes/tiny_grpo.toml" in text


def test_readme_setup_matches_ci() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = 'pip install "torch==2.13.0+cpu" -e ".[train,test,megatron,real]"'
    assert install in readme and install in ci
    engines = "rlctl engines install vllm sglang"
    assert engines in readme and engines in ci
    assert "python -m pytest -q" in readme and "python -m pytest -q" in ci
    assert "rlctl train recipes/tiny_grpo.toml" in readme


def test_path_constants() -> None:
    assert isinstance(ROOT, Path) and (ROOT / "pyproject.toml").exists()
