"""The result of loading a recipe: the typed recipe, its derived numbers and its provenance."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from rlctl.config.derived import Derived
from rlctl.config.problems import key_path
from rlctl.config.recipe import Recipe
from rlctl.config.render import render_toml

Loc = tuple[str | int, ...]
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def path_to_loc(path: str) -> Loc:
    """``rewards[0].name`` -> ``("rewards", 0, "name")`` (inverse of :func:`key_path`)."""
    return tuple(int(i) if i else name for name, i in _PART.findall(path))


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    """The recipe as TOML would spell it: aliases (``kl.in``), paths as strings."""
    return recipe.model_dump(mode="json", by_alias=True)


def _leaves(value: Any, loc: Loc) -> list[Loc]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, loc + (k,))]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, loc + (i,))]
    return [loc]


def leaf_sources(recipe: Recipe, source_of: Callable[[Loc], str]) -> dict[str, str]:
    """Key path -> source label for every leaf value of the resolved recipe."""
    return {key_path(loc): source_of(loc) for loc in _leaves(recipe_dict(recipe), ())}


@dataclass(frozen=True)
class LoadedRecipe:
    """A validated recipe, ready for the trainer."""

    recipe: Recipe
    """The typed recipe (defaults filled in)."""
    derived: Derived
    """Batch arithmetic computed once (samples per step, micro-batches per rank...)."""
    sources: Mapping[str, str]
    """Key path -> where its value came from (``default``, a file, ``env ...``, ``-s ...``)."""
    files: tuple[str, ...] = ()
    """The recipe files, in the order given."""
    plugin_options: Mapping[str, BaseModel] = field(default_factory=dict)
    """Validated option models keyed by options key path (``engines.train.options``...).

    Validated once, when the recipe is loaded; workers hand each component its own entry
    (engines through their spec), nothing validates an ``options`` table again. An empty
    ``[[rewards]]`` is scored by the task's default reward, whose options are
    ``rewards[0].options``."""

    def options_for(self, path: str) -> BaseModel | None:
        """The validated options at ``path`` (e.g. ``"data_plane.options"``), if its plugin
        registered an option model."""
        return self.plugin_options.get(path)

    def option_kwargs(self, path: str) -> dict[str, Any]:
        """The validated options at ``path`` as keyword arguments (how estimators, policy
        losses and rewards take them); ``{}`` where the plugin registered no option model."""
        options = self.plugin_options.get(path)
        return options.model_dump() if options is not None else {}

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe as plain data (TOML spelling)."""
        return recipe_dict(self.recipe)

    def to_toml(self, *, with_sources: bool = False) -> str:
        """The resolved recipe as TOML, derived numbers as trailing comments.

        The text is a valid recipe. ``with_sources`` adds ``# <source>`` after every value.
        """
        source_of = (lambda loc: self.sources.get(key_path(loc), "default")) if with_sources \
            else None
        text = render_toml(self.to_dict(), source_of)
        derived = "\n".join(f"#   {k} = {v}" for k, v in self.derived.as_dict().items())
        return f"{text}\n# derived (computed from the values above):\n{derived}\n"

    def to_json(self, *, with_sources: bool = False) -> str:
        """``{"recipe": ..., "derived": ..., "sources"?: ...}`` as indented JSON."""
        out: dict[str, Any] = {"recipe": self.to_dict(), "derived": self.derived.as_dict()}
        if with_sources:
            out["sources"] = dict(self.sources)
        return json.dumps(out, indent=2, ensure_ascii=False)
