"""Names a recipe selects from the registry, and strict validation of their ``options`` tables.

Every ``options`` table (engines, data plane, estimator, policy loss, rewards, task, sinks)
is validated by the option model its plugin registered, so a third-party plugin's options
are checked exactly like a built-in's. A name no plugin registered is a problem that lists
the registered names, and so is a selected name whose lazy ``module:attr`` target would not
load (checked without importing it, see :mod:`rlctl.registry_targets`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from rlctl.config.problems import ConfigProblem, choose_from, did_you_mean, key_path
from rlctl.config.recipe import Recipe
from rlctl.config.render import toml_value
from rlctl.config.strict import allows_non_finite, non_finite_paths
from rlctl.config.validation import Loc, problems_from_validation
from rlctl.hookspecs import PLUGIN_KINDS
from rlctl.registry import Registration, Registry

OptionsT = TypeVar("OptionsT", bound=BaseModel)


@dataclass(frozen=True)
class OptionsSpec:
    """Base of the component specs: hands a component its options, validated at load.

    Specs are built from a :class:`~rlctl.config.loaded.LoadedRecipe` (each spec's
    ``from_loaded``), the one place a component's options come from; nothing validates an
    ``options`` table again.
    """

    options_key: ClassVar[str]
    """Key path of the component's options table (``engines.train.options``)."""
    options: BaseModel | None = field(kw_only=True)
    """The table at :attr:`options_key` as validated when the recipe was loaded (an instance
    of the option model the component registered; ``None`` when it registered none); read it
    with :meth:`options_as`."""

    def options_as(self, model: type[OptionsT]) -> OptionsT:
        """The component's options as ``model`` (the option model it registered)."""
        if not isinstance(self.options, model):
            raise TypeError(
                f"[{self.options_key}]: expected {model.__name__} as validated when the recipe "
                f"was loaded, got {type(self.options).__name__}: build the spec from a loaded "
                "recipe (rlctl.config.pipeline.validate_recipe, then the spec's from_loaded)")
        return self.options


@dataclass(frozen=True)
class Selection:
    """One registry name chosen by the recipe."""

    kind: str
    """Registry kind (``model_engine``, ``reward_function``...)."""
    name: str
    """The registered name."""
    loc: Loc
    """Key path of the name in the recipe."""
    options_loc: Loc | None
    """Key path of its ``options`` table; ``None`` where the recipe has none for this kind."""
    options: dict[str, Any] | None
    """The raw options table."""


def selections(recipe: Recipe) -> Iterator[Selection]:
    """Every (kind, name) the recipe selects, with where its options live.

    Read from each kind's declaration (:data:`rlctl.hookspecs.PLUGIN_KINDS`), in its order.
    """
    for kind in PLUGIN_KINDS.values():
        for name, loc in _names(recipe, kind.select.split("."), ()):
            options_loc = _options_loc(kind.options, loc, name)
            options = _value_at(recipe, options_loc) if options_loc is not None else None
            yield Selection(kind.name, name, loc, options_loc, options)


def _names(obj: Any, parts: list[str], loc: Loc) -> Iterator[tuple[str, Loc]]:
    """The names at key path ``parts`` below ``obj`` (``x[]``: every entry of list ``x``)."""
    if not parts:
        if obj is not None:  # an optional name left out selects nothing
            yield obj, loc
        return
    if obj is None:  # an optional table left out ([rollout.environment]) selects nothing
        return
    key = parts[0].removesuffix("[]")
    value = getattr(obj, key)
    if parts[0].endswith("[]"):
        for i, item in enumerate(value):
            yield from _names(item, parts[1:], loc + (key, i))
    else:
        yield from _names(value, parts[1:], loc + (key,))


def _options_loc(path: str | None, name_loc: Loc, name: str) -> Loc | None:
    """``rewards[].options`` for the name at ``("rewards", 2, "name")``: ``("rewards", 2,
    "options")``; ``{name}`` stands for the selected name."""
    if path is None:
        return None
    loc: list[str | int] = []
    for part in path.split("."):
        if part.endswith("[]"):
            loc += [part[:-2], name_loc[len(loc) + 1]]  # the entry the name was read from
        else:
            loc.append(name if part == "{name}" else part)
    return tuple(loc)


def _value_at(recipe: Recipe, loc: Loc) -> dict[str, Any]:
    obj: Any = recipe
    for part in loc:
        if isinstance(part, int):
            obj = obj[part]
        elif isinstance(obj, dict):
            obj = obj.get(part, {})  # a name listed without its own options table
        else:
            obj = getattr(obj, part)
    return obj


def _default_reward(recipe: Recipe, registry: Registry) -> Registration | None:
    """The reward a task names for a recipe without ``[[rewards]]`` (see effective_rewards)."""
    task = registry.find("task", recipe.data.task) if recipe.data.task and not recipe.rewards \
        else None
    name = task.metadata.get("reward") if task is not None else None
    return registry.find("reward_function", name) if name else None


def weight_sync_name(recipe: Recipe, registry: Registry | None) -> str | None:
    """The weight sync a run uses: ``[engines.rollout] weight_sync``, else the rollout
    engine's default (its ``weight_sync`` metadata; ``in_process`` when it names none).
    ``None`` when neither is known (no name, and the engine is not registered)."""
    rollout = recipe.engines.rollout
    if rollout.weight_sync is not None:
        return rollout.weight_sync
    engine = registry.find("rollout_engine", rollout.backend) if registry is not None else None
    return None if engine is None else str(engine.metadata.get("weight_sync", "in_process"))


def _default_weight_sync(recipe: Recipe, registry: Registry) -> list[Selection]:
    """The rollout engine's default weight sync when the recipe names none: its
    ``[engines.rollout.weight_sync_options]`` are validated like a named sync's."""
    if recipe.engines.rollout.weight_sync is not None:
        return []  # a selection of its own (PLUGIN_KINDS)
    name = weight_sync_name(recipe, registry)
    if name is None:
        return []  # the unknown rollout engine is the problem reported
    return [Selection("weight_sync", name, ("engines", "rollout", "weight_sync"),
                      ("engines", "rollout", "weight_sync_options"),
                      recipe.engines.rollout.weight_sync_options)]


def kind_words(kind: str) -> str:
    return kind.replace("_", " ")


def unknown_name_problem(sel: Selection, registry: Registry) -> ConfigProblem:
    """A selected name no plugin registered: the failed plugin that had it, else a guess.

    A name that a plugin registered before it was refused is that plugin's: say so, not
    "did you mean" a built-in it only looks like. When some plugins did not even import (so
    what they provide is unknown), only a close guess is offered, after them.
    """
    what = f'no {kind_words(sel.kind)} named "{sel.name}" is registered'
    provider = registry.failed_provider(sel.kind, sel.name)
    if provider is not None:
        return ConfigProblem(
            _path(sel.loc), f"{what}: plugin {provider.name}, which provides it, failed to "
            f"load: {provider.error}", f"fix or reinstall plugin {provider.name} "
            "(`rlctl plugins list` shows every failure), or choose another name")
    known = registry.names(sel.kind)
    if not registry.failures:
        fix = choose_from(sel.name, known, what=f"{kind_words(sel.kind)}s")
        return ConfigProblem(_path(sel.loc), what,
                             fix + ", or install the plugin that provides it")
    failed = ", ".join(f.name for f in registry.failures)
    guess = did_you_mean(sel.name, known)
    close = guess is not None and difflib.SequenceMatcher(None, sel.name, guess).ratio() >= 0.85
    fix = (f"plugins that failed to load: {failed} (see rlctl plugins list): if one of them "
           "provides it, fix that plugin")
    fix += (f'; or did you mean "{guess}"?' if close
            else f"; registered {kind_words(sel.kind)}s: {', '.join(known) or 'none'}")
    return ConfigProblem(_path(sel.loc), what, fix)


def target_problem(sel: Selection, reg: Registration, why: str) -> ConfigProblem:
    """A selected name whose registered target does not exist: blame the plugin."""
    return ConfigProblem(
        _path(sel.loc),
        f"{reg.describe()} cannot be loaded: its target {reg.target!r} is broken: {why}",
        "fix the target in the plugin's register() call (or report it to the plugin's "
        "authors), or choose another name; `rlctl plugins list --check` checks every target",
    )


def _path(loc: Loc) -> str:
    return key_path(loc)


def validate_options(
    sel: Selection, reg: Registration
) -> tuple[BaseModel | None, list[ConfigProblem]]:
    """Validate one options table against the model ``reg`` registered."""
    if sel.options_loc is None:
        return None, []
    options = sel.options or {}
    model = reg.options
    if model is None:
        if options:
            return None, [
                ConfigProblem(
                    _path(sel.options_loc),
                    f'{kind_words(sel.kind)} "{sel.name}" takes no options, got '
                    + ", ".join(sorted(options)),
                    "remove the options table",
                )
            ]
        return None, []
    try:
        validated = model.model_validate(options)
    except ValidationError as exc:
        return None, problems_from_validation(
            model, exc, prefix=sel.options_loc, what=f'options of "{sel.name}"'
        )
    if allows_non_finite(model):  # a third-party model that does not inherit OptionsModel
        bad = [
            ConfigProblem(
                _path(sel.options_loc + loc), f"{toml_value(_at(options, loc))} is not a finite "
                "number", "use a finite number (nan and inf are not allowed)")
            for loc in non_finite_paths(options)
        ]
        if bad:
            return None, bad
    return validated, []


def _at(data: Any, loc: Loc) -> Any:
    for part in loc:
        data = data[part]
    return data


def check_selections(
    recipe: Recipe, registry: Registry
) -> tuple[dict[str, BaseModel], list[ConfigProblem]]:
    """Check every selected name exists and validate its options.

    Returns the validated option models keyed by their options key path
    (``engines.train.options``, ``rewards[0].options``...).
    """
    validated: dict[str, BaseModel] = {}
    problems: list[ConfigProblem] = []
    for sel in [*selections(recipe), *_default_weight_sync(recipe, registry)]:
        reg = registry.find(sel.kind, sel.name)
        if reg is None:
            problems.append(unknown_name_problem(sel, registry))
            continue
        broken = reg.target_problem()
        if broken is not None:
            problems.append(target_problem(sel, reg, broken))
        model, probs = validate_options(sel, reg)
        problems += probs
        if model is not None and sel.options_loc is not None:
            validated[_path(sel.options_loc)] = model
    default = _default_reward(recipe, registry)
    if default is not None and default.options is not None:
        # the task's reward stands in for an empty [[rewards]]: it runs with its defaults
        try:
            validated["rewards[0].options"] = default.options.model_validate({})
        except ValidationError:
            problems.append(ConfigProblem(
                "rewards", f'the default reward "{default.name}" of task "{recipe.data.task}" '
                "needs options", f'add a [[rewards]] table: name = "{default.name}" and its '
                "options"))
    # options for a sink that is not selected are a typo or a leftover
    for name in recipe.logging.sink_options:
        if name not in recipe.logging.sinks:
            guess = did_you_mean(name, registry.names("metric_sink"))
            fix = f'add "{name}" to logging.sinks, or remove these options'
            if guess is not None and guess != name:
                fix = f'did you mean "{guess}"? ' + fix.replace(f'"{name}"', f'"{guess}"')
            problems.append(
                ConfigProblem(
                    f"logging.sink_options.{name}",
                    f'options given for sink "{name}", which is not in logging.sinks',
                    fix,
                )
            )
    return validated, problems
