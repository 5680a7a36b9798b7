"""Names a recipe selects from the registry, and strict validation of their ``options`` tables.

Every ``options`` table (engines, data plane, estimator, policy loss, rewards, task, sinks)
is validated by the option model its plugin registered, so a third-party plugin's options
are checked exactly like a built-in's. A name no plugin registered is a problem that lists
the registered names, and so is a selected name whose lazy ``module:attr`` target would not
load (checked without importing it, see :mod:`rlctl.registry_targets`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rlctl.config.problems import ConfigProblem, choose_from, did_you_mean, key_path
from rlctl.config.recipe import Recipe
from rlctl.config.render import toml_value
from rlctl.config.strict import allows_non_finite, non_finite_paths
from rlctl.config.validation import Loc, problems_from_validation
from rlctl.registry import Registration, Registry


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
    """Every (kind, name) the recipe selects, with where its options live."""
    e, a = recipe.engines, recipe.algorithm
    yield Selection("model_engine", e.train.backend, ("engines", "train", "backend"),
                    ("engines", "train", "options"), e.train.options)
    yield Selection("rollout_engine", e.rollout.backend, ("engines", "rollout", "backend"),
                    ("engines", "rollout", "options"), e.rollout.options)
    if e.rollout.weight_sync is not None:
        yield Selection("weight_sync", e.rollout.weight_sync,
                        ("engines", "rollout", "weight_sync"), None, None)
    yield Selection("advantage_estimator", a.estimator, ("algorithm", "estimator"),
                    ("algorithm", "estimator_options"), a.estimator_options)
    yield Selection("policy_loss", a.loss.policy_loss, ("algorithm", "loss", "policy_loss"),
                    ("algorithm", "loss", "options"), a.loss.options)
    for i, reward in enumerate(recipe.rewards):
        yield Selection("reward_function", reward.name, ("rewards", i, "name"),
                        ("rewards", i, "options"), reward.options)
    if recipe.data.task is not None:
        yield Selection("task", recipe.data.task, ("data", "task"),
                        ("data", "task_options"), recipe.data.task_options)
    yield Selection("agent_loop", recipe.rollout.agent_loop, ("rollout", "agent_loop"),
                    None, None)
    yield Selection("data_plane", recipe.data_plane.backend, ("data_plane", "backend"),
                    ("data_plane", "options"), recipe.data_plane.options)
    for i, sink in enumerate(recipe.logging.sinks):
        yield Selection("metric_sink", sink, ("logging", "sinks", i),
                        ("logging", "sink_options", sink),
                        recipe.logging.sink_options.get(sink, {}))


def kind_words(kind: str) -> str:
    return kind.replace("_", " ")


def unknown_name_problem(sel: Selection, registry: Registry) -> ConfigProblem:
    known = registry.names(sel.kind)
    fix = choose_from(sel.name, known, what=f"{kind_words(sel.kind)}s")
    if registry.failures:
        failed = ", ".join(f.name for f in registry.failures)
        fix += f"; plugins that failed to load: {failed} (see rlctl plugins list)"
    else:
        fix += ", or install the plugin that provides it"
    return ConfigProblem(
        _path(sel.loc),
        f'no {kind_words(sel.kind)} named "{sel.name}" is registered',
        fix,
    )


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
    for sel in selections(recipe):
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


def unimplemented(recipe: Recipe, registry: Registry) -> list[Selection]:
    """Selected names that are registered but have no implementation yet (target None)."""
    out = []
    for sel in selections(recipe):
        reg = registry.find(sel.kind, sel.name)
        if reg is not None and not reg.implemented:
            out.append(sel)
    return out
