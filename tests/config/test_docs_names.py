"""The plugin-author pages name real things: every ``rlctl.*`` path, every ``from rlctl...
import`` and every error class they cite imports from where they say, and the tables of
``RewardInput`` fields, data-plane errors and target signatures cover the code."""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any

import pytest

from rlctl.dataplane import errors as dataplane_errors
from rlctl.registry import Registry
from rlctl.rewards import RewardInput
from tests.config.config_helpers import ROOT

PAGES = ("plugins.md", "dataplane.md")


def _text(page: str) -> str:
    return (ROOT / "docs" / page).read_text(encoding="utf-8")


def _resolve(dotted: str) -> Any:
    """``rlctl.a.b.C.d``: import the longest module prefix, then walk attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def _dotted_names() -> list[tuple[str, str]]:
    found = set()
    for page in PAGES:
        for match in re.finditer(r"(?<![\w/.])rlctl(?:\.[A-Za-z_]\w*)+", _text(page)):
            found.add((page, match.group(0)))
    return sorted(found)


@pytest.mark.parametrize(("page", "dotted"), _dotted_names(), ids=lambda x: x)
def test_every_dotted_rlctl_name_in_the_docs_exists(page: str, dotted: str) -> None:
    _resolve(dotted)


def _imports() -> list[tuple[str, str, str]]:
    found = set()
    for page in PAGES:
        for module, names in re.findall(r"from (rlctl[\w.]*) import ([\w, ]+)", _text(page)):
            for name in names.split(","):
                found.add((page, module, name.strip()))
    return sorted(found)


@pytest.mark.parametrize(("page", "module", "name"), _imports(), ids=lambda x: x)
def test_every_import_in_the_docs_works(page: str, module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name)


def test_the_error_tables_name_real_classes_at_their_import_paths() -> None:
    rows = re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?[^|]*\| `(rlctl[\w.]*)` \|",
                      _text("plugins.md"), flags=re.MULTILINE)
    assert len(rows) >= 5
    for first, second, module in rows:
        for name in filter(None, (first, second)):
            assert isinstance(getattr(importlib.import_module(module), name), type), name


def test_every_data_plane_error_is_documented_and_exported() -> None:
    text = _text("dataplane.md")
    from rlctl import dataplane

    for name in dataplane_errors.__all__:
        assert f"| `{name}` |" in text, f"docs/dataplane.md: add {name} to the errors table"
        assert getattr(dataplane, name) is getattr(dataplane_errors, name)


def test_every_reward_input_field_is_documented() -> None:
    text = _text("plugins.md")
    for field in dataclasses.fields(RewardInput):
        assert f"| `{field.name}` |" in text, f"docs/plugins.md: document RewardInput.{field.name}"


def test_what_each_target_receives_covers_every_kind(registry: Registry) -> None:
    section = _text("plugins.md").split("## What a target receives", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(documented) == sorted(registry.kinds())
