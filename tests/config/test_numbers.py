"""Numbers are strict and finite everywhere: every float field of every recipe section and of
every built-in option model refuses nan and inf, every integer field refuses ``true`` and
``3.0``, every boolean refuses ``1``, each with its key path and a fix.

The fields are found by walking the models, so a field added later is covered too.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from rlctl.config.problems import ConfigProblem
from rlctl.config.recipe import MAX_RUN_NAME, MAX_SEED, Recipe, RewardSection
from rlctl.config.strict import allows_non_finite
from rlctl.config.validation import problems_from_validation
from rlctl.registry import Registry
from tests.config.config_helpers import BASE

Problems = Callable[..., list[ConfigProblem]]
Loc = tuple[str | int, ...]


def _leaf_type(tp: Any) -> Any:
    """``X | None`` / ``Annotated[X, ...]`` -> ``X``."""
    while True:
        if get_origin(tp) is typing.Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def leaves(model: type[BaseModel], prefix: Loc = ()) -> Iterator[tuple[Loc, Any]]:
    """(key path, type) of every scalar field, through nested sections and fixed tuples."""
    for name, info in model.model_fields.items():
        loc = (*prefix, info.alias or name)
        tp = _leaf_type(info.annotation)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            yield from leaves(tp, loc)
        elif get_origin(tp) is list and get_args(tp) and isinstance(get_args(tp)[0], type) \
                and issubclass(get_args(tp)[0], BaseModel):
            yield from leaves(get_args(tp)[0], (*loc, 0))
        elif get_origin(tp) is tuple and Ellipsis not in get_args(tp):
            for i, item in enumerate(get_args(tp)):
                yield (*loc, i), _leaf_type(item)
        elif get_origin(tp) is tuple:
            yield (*loc, 0), _leaf_type(get_args(tp)[0])
        else:
            yield loc, tp


def key(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def override(loc: Loc, literal: str) -> list[str]:
    """-s overrides that put ``literal`` at ``loc`` (lists are written whole)."""
    if loc[0] == "rewards":
        return [f'rewards=[{{name="digits_match", {loc[2]}={literal}}}]']
    if isinstance(loc[-1], int):  # a tuple item: the other items keep a valid value
        size = 2 if key(loc[:-1]).endswith("betas") else 1
        items = ["0.5"] * size
        items[loc[-1]] = literal
        return [f"{key(loc[:-1])}=[{', '.join(items)}]"]
    return [f"{key(loc)}={literal}"]


RECIPE_FLOATS = [loc for loc, tp in leaves(Recipe) if tp is float]
RECIPE_INTS = [loc for loc, tp in leaves(Recipe) if tp is int]
RECIPE_BOOLS = [loc for loc, tp in leaves(Recipe) if tp is bool]


def test_the_walk_finds_the_fields_the_issue_named() -> None:
    floats = {key(loc) for loc in RECIPE_FLOATS}
    assert {"rewards[0].weight", "algorithm.optim.lr", "rollout.temperature",
            "algorithm.kl.coef", "algorithm.optim.betas[0]", "algorithm.optim.betas[1]"} <= floats
    assert {"run.seed", "algorithm.group_size"} <= {key(loc) for loc in RECIPE_INTS}
    assert len(RECIPE_FLOATS) >= 20 and len(RECIPE_INTS) >= 20


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf"])
def test_every_recipe_float_refuses_non_finite(problems: Problems, literal: str) -> None:
    accepted = []
    for loc in RECIPE_FLOATS:
        found = {p.path: p for p in problems(BASE, overrides=override(loc, literal))}
        p = found.get(key(loc))
        if p is None or p.message != f"{literal} is not a finite number":
            accepted.append((key(loc), found))
            continue
        assert p.fix.startswith("use a finite number (nan and inf are not allowed)")
    assert accepted == []


@pytest.mark.parametrize(("literal", "shown"), [("true", "true"), ("3.0", "3.0")])
def test_every_recipe_integer_refuses_booleans_and_floats(
    problems: Problems, literal: str, shown: str
) -> None:
    accepted = []
    for loc in RECIPE_INTS:
        found = {p.path: p for p in problems(BASE, overrides=override(loc, literal))}
        p = found.get(key(loc))
        if p is None or p.message != f"expected a whole number, got {shown}":
            accepted.append((key(loc), found))
    assert accepted == []


def test_every_recipe_boolean_refuses_numbers(problems: Problems) -> None:
    accepted = []
    for loc in RECIPE_BOOLS:
        found = {p.path: p for p in problems(BASE, overrides=override(loc, "1"))}
        p = found.get(key(loc))
        if p is None or p.message != "expected true or false, got 1":
            accepted.append((key(loc), found))
    assert accepted == []


def test_a_float_field_still_takes_an_integer(load) -> None:  # type: ignore[no-untyped-def]
    recipe = load(BASE, overrides=["algorithm.kl.coef=1",
                                   "rewards=[{name='digits_match', weight=2}]"]).recipe
    assert recipe.algorithm.kl.coef == 1.0 and recipe.rewards[0].weight == 2.0


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        (["algorithm.optim.betas=[1.0, 0.5]"], "algorithm.optim.betas[0]",
         "1.0 is out of range (must be < 1.0)"),
        (["algorithm.optim.betas=[0.9, -0.1]"], "algorithm.optim.betas[1]",
         "-0.1 is out of range (must be >= 0.0)"),
        (["algorithm.optim.betas=[0.9]"], "algorithm.optim.betas",
         "expected a list of 2 items, got [0.9]"),
        ([f"run.seed={2**64 + 1}"], "run.seed",
         f"{2**64 + 1} is out of range (must be <= {MAX_SEED})"),
        (["run.seed=-1"], "run.seed", "-1 is out of range (must be >= 0)"),
        ([f"run.name={'a' * 300}"], "run.name",
         f'"{"a" * 56}... is 300 characters long, more than {MAX_RUN_NAME}'),
    ],
)
def test_out_of_range_numbers_and_names(problems: Problems, overrides: list[str], path: str,
                                        message: str) -> None:
    (p,) = problems(BASE, overrides=overrides)  # exactly one: no knock-on problems
    assert (p.path, p.message) == (path, message)
    assert p.fix


def test_the_largest_seed_and_name_are_fine(load) -> None:  # type: ignore[no-untyped-def]
    recipe = load(BASE, overrides=[f"run.seed={MAX_SEED}", f"run.name={'a' * MAX_RUN_NAME}"])
    assert recipe.recipe.run.seed == MAX_SEED


def test_a_checkpoint_snapshot_still_validates() -> None:
    """Strict mode must not refuse what the recipe itself dumps (paths as text, tuples as lists)."""
    recipe = Recipe.model_validate({"data": {"train": "t.parquet"},
                                    "rewards": [RewardSection(name="x").model_dump()]})
    again = Recipe.model_validate(recipe.model_dump(mode="json", by_alias=True))
    assert again == recipe


# --------------------------------------------------------------------------- option models


def _option_models(registry: Registry) -> list[type[BaseModel]]:
    models = []
    for kind in registry.kinds():
        for reg in registry.all(kind):
            if reg.options is not None and reg.options not in models:
                models.append(reg.options)
    return models


def _errors(model: type[BaseModel], loc: Loc, value: Any) -> list[ConfigProblem]:
    data: Any = value
    for part in reversed(loc):
        data = [data] if isinstance(part, int) else {part: data}
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return problems_from_validation(model, exc)
    return []


def test_every_builtin_option_model_is_strict_and_finite(registry: Registry) -> None:
    models = _option_models(registry)
    assert len(models) >= 15
    lax = [m.__name__ for m in models if allows_non_finite(m)]
    assert lax == []
    accepted = []
    for model in models:
        for loc, tp in leaves(model):
            cases = {float: [float("nan"), float("inf")], int: [True], bool: [1]}.get(tp, [])
            for value in cases:
                found = {p.path: p.message for p in _errors(model, loc, value)}
                if key(loc) not in found:
                    accepted.append((model.__name__, key(loc), value, found))
    assert accepted == []
