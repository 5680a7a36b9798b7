"""Sources -> merged data -> a typed :class:`Recipe`, collecting every problem on the way.

Precedence, lowest first: defaults < recipe files in the order given < ``RLCTL_*``
environment < ``-s`` overrides. When some values are invalid we still want the later stages
(plugin options, cross-field checks) to report their problems in the same run, so the
invalid keys are pruned and the rest is validated again: :attr:`Resolved.recipe` is then a
*partial* recipe (invalid values replaced by defaults) and :attr:`Resolved.problems` is
non-empty.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlctl.config.merge import Merged, merge_layers
from rlctl.config.problems import ConfigProblem
from rlctl.config.recipe import Recipe
from rlctl.config.sources import Layer, env_layers, file_layers, parse_override
from rlctl.config.validation import problems_from_validation, prune, to_aliases

# Pruning converges in a few rounds (each removes at least one offending key); the cap only
# guards against a pathological recipe.
_MAX_PRUNE_ROUNDS = 8
_STRING_ERRORS = ("string_type", "path_type")


@dataclass
class Resolved:
    """Outcome of reading and validating the sources (before plugin and cross-field checks)."""

    recipe: Recipe | None
    """The typed recipe; partial (invalid values defaulted) when ``problems`` is non-empty."""
    merged: Merged
    """Raw merged data plus provenance."""
    problems: list[ConfigProblem]
    """Source and section problems."""
    sources_ok: bool = True
    """False when a recipe file is missing or unreadable: its content is unknown, so checks
    that look at the whole recipe would only add noise."""


def gather_layers(
    paths: Sequence[str | Path],
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[list[Layer], list[ConfigProblem]]:
    """All layers in precedence order (lowest first)."""
    env = os.environ if env is None else env
    layers, problems = file_layers(paths)
    env_ls, env_probs = env_layers(env)
    layers += env_ls
    problems += env_probs
    for text in overrides:
        layer, probs = parse_override(text)
        problems += probs
        if layer is not None:
            layers.append(layer)
    for layer in layers:
        layer.data = to_aliases(layer.data, Recipe)
        layer.raw_strings = {_alias_key(k): v for k, v in layer.raw_strings.items()}
        layer.unset = [_alias_key(k) for k in layer.unset]
    return layers, problems


def _alias_key(key: tuple[str, ...]) -> tuple[str, ...]:
    """A raw-string key path spelt with aliases, like the layer data it belongs to."""
    node: dict[str, Any] = to_aliases(_nest(key), Recipe)
    out: list[str] = []
    while isinstance(node, dict) and node:
        ((k, node),) = node.items()
        out.append(k)
    return tuple(out)


def _nest(key: tuple[str, ...]) -> dict[str, Any]:
    node: Any = None
    for part in reversed(key):
        node = {part: node}
    return node


def resolve(
    paths: Sequence[str | Path],
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Resolved:
    """Read, merge and validate the sections; never raises for a bad recipe."""
    layers, problems = gather_layers(paths, overrides, env)
    files_read = sum(1 for layer in layers if not layer.label.startswith(("env ", "-s ")))
    merged, merge_problems = merge_layers(layers)
    problems += merge_problems
    recipe, section_problems = validate_sections(merged)
    sources_ok = files_read == len(paths)
    return Resolved(recipe, merged, problems + section_problems, sources_ok)


def validate_sections(merged: Merged) -> tuple[Recipe | None, list[ConfigProblem]]:
    """Validate ``merged.data`` against :class:`Recipe`; prune and retry to get a partial one."""
    data = copy.deepcopy(merged.data)
    _retry_as_strings(data, merged)
    problems: list[ConfigProblem] = []
    for _ in range(_MAX_PRUNE_ROUNDS):
        try:
            return Recipe.model_validate(data), problems
        except ValidationError as exc:
            problems += problems_from_validation(
                Recipe, exc, what="keys", source_of=merged.source_of
            )
            for error in exc.errors():
                prune(data, error["loc"])
    return None, problems


def _retry_as_strings(data: dict[str, Any], merged: Merged) -> None:
    """``-s run.name=123`` means the text "123": give string fields their raw text back.

    Values from ``-s`` and the environment are parsed as TOML literals; where that made a
    number or bool out of what a string field expects, use the original text instead.
    """
    if not merged.raw_strings:
        return
    try:
        Recipe.model_validate(data)
        return
    except ValidationError as exc:
        errors = exc.errors()
    for error in errors:
        if error["type"] not in _STRING_ERRORS:
            continue
        key = tuple(str(p) for p in error["loc"])
        raw = merged.raw_strings.get(key)
        if raw is None:
            continue
        node: Any = data
        for part in error["loc"][:-1]:
            node = node[part]
        node[error["loc"][-1]] = raw
