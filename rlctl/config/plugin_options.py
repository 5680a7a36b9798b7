"""Names a recipe selects from the registry, and strict validation of their ``options`` tables.

Every ``options`` table (engines, data plane, estimator, policy loss, rewards, task, sinks)
is validated by the option model its plugin registered, so a third-party plugin's options
are checked exactly like a built-in's. A name no plugin registered is a problem that lists
the registered names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rlctl.config.problems import ConfigProblem, choose_from, did_you_mean, key_path
from rlctl.config.recipe import Recipe
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


def weight_sync_name(recipe: Recipe, registry: Registry | None) -> str | None:
    """The weight sync a run uses: ``[engines.rollout] weight_sync``, else the rollout
    engine's default (its ``weight_sync`` metadata; ``in_process`` when it names none).
    ``None`` when neither is known (no name, and the engine is not registered)."""
    rollout = recipe.engines.rollout
    if rollout.weight_sync is not None:
        return rollout.weight_sync
    engine = registry.find("rollout_engine", rollout.backend) if registry is not None else None
    return None if engine is None else str(engine.metadata.get("weight_sync", "in_process"))


def selections(recipe: Recipe, registry: Registry | None = None) -> Iterator[Selection]:
    """Every (kind, name) the recipe selects, with where its options live.

    ``registry`` resolves what the recipe leaves to a plugin (the rollout engine's default
    weight sync, whose options are validated like a named one's).
    """
    e, a = recipe.engines, recipe.algorithm
    yield Selection("model_engine", e.train.backend, ("engines", "train", "backend"),
                    ("engines", "train", "options"), e.train.options)
    yield Selection("rollout_engine", e.rollout.backend, ("engines", "rollout", "backend"),
                    ("engines", "rollout", "options"), e.rollout.options)
    sync = weight_sync_name(recipe, registry)
    if sync is not None:
        yield Selection("weight_sync", sync, ("engines", "rollout", "weight_sync"),
                        ("engines", "rollout", "weight_sync_options"),
                        e.rollout.weight_sync_options)
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
        return model.model_validate(options), []
    except ValidationError as exc:
        return None, problems_from_validation(
            model, exc, prefix=sel.options_loc, what=f'options of "{sel.name}"'
        )


def check_selections(
    recipe: Recipe, registry: Registry
) -> tuple[dict[str, BaseModel], list[ConfigProblem]]:
    """Check every selected name exists and validate its options.

    Returns the validated option models keyed by their options key path
    (``engines.train.options``, ``rewards[0].options``...).
    """
    validated: dict[str, BaseModel] = {}
    problems: list[ConfigProblem] = []
    for sel in selections(recipe, registry):
        reg = registry.find(sel.kind, sel.name)
        if reg is None:
            problems.append(unknown_name_problem(sel, registry))
            continue
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
    for sel in selections(recipe, registry):
        reg = registry.find(sel.kind, sel.name)
        if reg is not None and not reg.implemented:
            out.append(sel)
    return out
