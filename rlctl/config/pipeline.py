"""The one entry point of the config package: recipe sources (or a recipe built in code) ->
a validated :class:`LoadedRecipe`, or :class:`ConfigError` with every problem found.

Stages, each reporting all of its problems:

1. sources and sections (:mod:`rlctl.config.loading`): missing files, TOML syntax, unknown
   keys, wrong types, out-of-range values;
2. registry names and plugin ``options`` tables (:mod:`rlctl.config.plugin_options`);
3. cross-field checks (:mod:`rlctl.config.checks`: they use registry metadata such as
   ``requires`` and ``group_based``);
4. every plugin's ``validate_config`` hook.

The plugin ``options`` tables are validated here once (stage 2) and kept in the
:class:`LoadedRecipe`; ``resources.mode = "local"`` (``--local``) then runs one training
rank, and the derived numbers are computed once, for what will run.

Stages 2-4 run on a partial recipe when stage 1 found problems; their problems are kept
only where they do not overlap a key already reported (a defaulted value would otherwise
cause knock-on complaints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel

from rlctl.config.checks import cross_field_problems, hook_problems
from rlctl.config.derived import derive, model_parallel_size
from rlctl.config.loaded import LoadedRecipe, Loc, leaf_sources, path_to_loc
from rlctl.config.loading import resolve
from rlctl.config.merge import DEFAULT_SOURCE
from rlctl.config.placement import placement_problems
from rlctl.config.plugin_options import check_selections
from rlctl.config.problems import ConfigError, ConfigProblem, dedupe
from rlctl.config.recipe import Recipe
from rlctl.config.reward_checks import staleness_policy_problems
from rlctl.registry import Registry, get_registry

IN_CODE = "in code"
"""The source label of every value of a recipe built in code (:func:`validate_recipe`)."""
LOCAL_RANKS = "local mode (one rank per role)"
"""The source label of ``engines.train.ranks`` when local mode set it to 1."""


def load_recipe(
    paths: Sequence[str | Path],
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    registry: Registry | None = None,
) -> LoadedRecipe:
    """Load recipe files with ``RLCTL_*`` env and ``-s`` overrides; validate everything.

    ``env`` defaults to ``os.environ``. Raises :class:`ConfigError` listing every problem.
    """
    registry = registry if registry is not None else get_registry()
    resolved = resolve(paths, overrides, env)
    problems = list(resolved.problems)
    recipe = resolved.recipe
    if recipe is None or not resolved.sources_ok:
        raise ConfigError(dedupe(problems))
    validated, later = _plugin_checks(recipe, registry)
    problems += _not_overlapping(later, problems)
    if problems:
        problems = [_with_source(p, resolved.merged.source_of) for p in problems]
        raise ConfigError(dedupe(problems))
    return _loaded(recipe, validated, resolved.merged.source_of, tuple(str(p) for p in paths))


def validate_recipe(recipe: Recipe, *, registry: Registry | None = None) -> LoadedRecipe:
    """Validate a recipe built in code (tests, embedding applications) like a loaded one.

    Raises :class:`ConfigError` listing every problem; every value's source is ``in code``.
    """
    registry = registry if registry is not None else get_registry()
    validated, problems = _plugin_checks(recipe, registry)
    if problems:
        raise ConfigError(dedupe(problems))
    return _loaded(recipe, validated, lambda loc: IN_CODE, ())


def _plugin_checks(
    recipe: Recipe, registry: Registry
) -> tuple[dict[str, BaseModel], list[ConfigProblem]]:
    """Stages 2-4: names and options (validated once, here), cross-field checks, hooks."""
    validated, problems = check_selections(recipe, registry)
    mp = model_parallel_size(validated.get("engines.train.options"))
    problems += cross_field_problems(recipe, registry, model_parallel=mp)
    problems += staleness_policy_problems(recipe, registry, validated)
    problems += placement_problems(recipe, registry, validated)
    problems += hook_problems(recipe, registry)
    return validated, problems


def _loaded(
    recipe: Recipe,
    validated: dict[str, BaseModel],
    source_of: Callable[[Loc], str],
    files: tuple[str, ...],
) -> LoadedRecipe:
    sources = leaf_sources(recipe, source_of)
    if recipe.resources.mode == "local" and recipe.engines.train.ranks > 1:
        # Local mode runs one rank per role in this process. Ranks are an engine setting, so
        # the math (global batch, minibatches, normalisers) is unchanged; the per-rank numbers
        # are derived for the one rank that runs.
        train = recipe.engines.train.model_copy(update={"ranks": 1})
        engines = recipe.engines.model_copy(update={"train": train})
        recipe = recipe.model_copy(update={"engines": engines})
        sources["engines.train.ranks"] = LOCAL_RANKS
    mp = model_parallel_size(validated.get("engines.train.options"))
    return LoadedRecipe(recipe=recipe, derived=derive(recipe, mp), sources=sources, files=files,
                        plugin_options=validated)


def _with_source(problem: ConfigProblem, source_of: Callable[[Loc], str]) -> ConfigProblem:
    """Name where the offending value came from when the stage that found it did not."""
    if problem.source or not problem.path:
        return problem
    label = source_of(path_to_loc(problem.path))
    return problem if label == DEFAULT_SOURCE else replace(problem, source=label)


def _related(a: str, b: str) -> bool:
    """One key path is the other or lies inside it (``a.b`` and ``a.b.c``, ``r`` and ``r[0]``)."""
    if not a or not b:
        return False
    return a == b or a.startswith((b + ".", b + "[")) or b.startswith((a + ".", a + "["))


def _not_overlapping(
    later: list[ConfigProblem], earlier: list[ConfigProblem]
) -> list[ConfigProblem]:
    if not earlier:
        return later
    return [p for p in later if not any(_related(p.path, e.path) for e in earlier)]
