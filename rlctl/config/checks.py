"""Cross-field checks and :func:`load_recipe`, the one entry point that turns sources into a
validated :class:`LoadedRecipe` or raises :class:`ConfigError` with every problem found.

Stages, each reporting all of its problems:

1. sources and sections (:mod:`rlctl.config.loading`): missing files, TOML syntax, unknown
   keys, wrong types, out-of-range values;
2. registry names and plugin ``options`` tables (:mod:`rlctl.config.plugin_options`);
3. cross-field checks below (they use registry metadata such as ``requires`` and
   ``group_based``);
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

from rlctl.config.derived import derive, model_parallel_size
from rlctl.config.loaded import LoadedRecipe, Loc, leaf_sources, path_to_loc
from rlctl.config.loading import resolve
from rlctl.config.merge import DEFAULT_SOURCE
from rlctl.config.plugin_options import check_selections, kind_words
from rlctl.config.problems import ConfigError, ConfigProblem, dedupe
from rlctl.config.recipe import Recipe
from rlctl.config.reward_checks import sampling_and_reward_problems, streaming_problems
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
    problems += streaming_problems(recipe, registry, validated)
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


# --------------------------------------------------------------------------- cross-field


def _divisors(n: int, limit: int = 8) -> str:
    ds = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(str(d) for d in ds[:limit]) + (", ..." if len(ds) > limit else "")


def cross_field_problems(
    recipe: Recipe, registry: Registry, *, model_parallel: int = 1
) -> list[ConfigProblem]:
    """Checks that involve several fields or registry metadata."""
    problems: list[ConfigProblem] = []
    problems += _data_problems(recipe, registry)
    problems += _estimator_problems(recipe, registry)
    problems += _batch_problems(recipe, model_parallel)
    problems += _engine_problems(recipe, registry)
    problems += _logging_problems(recipe)
    problems += sampling_and_reward_problems(recipe, registry)
    return problems


def _data_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    data = recipe.data
    out: list[ConfigProblem] = []
    if data.train is None and data.task is None:
        out.append(ConfigProblem(
            "data", "no prompts: neither data.train nor data.task is set",
            'set data.train = "train.parquet" or data.task = "<a registered task>" '
            f"(registered tasks: {', '.join(registry.names('task')) or 'none'})"))
    elif data.train is not None and data.task is not None:
        out.append(ConfigProblem(
            "data.task", "both data.train and data.task are set; prompts come from one source",
            "remove data.task to train on the parquet file, or data.train to use the task"))
    elif not recipe.rewards:
        # a task names the reward that scores it by default; parquet prompts do not
        task = registry.find("task", data.task) if data.task else None
        if data.train is not None or (task is not None and not task.metadata.get("reward")):
            out.append(ConfigProblem(
                "rewards", "no reward function: [[rewards]] is empty",
                'add a [[rewards]] table with name = "<a registered reward function>" '
                f"(registered: {', '.join(registry.names('reward_function')) or 'none'})"))
    if recipe.schedule.eval_every > 0 and data.val is None and data.task is None:
        out.append(ConfigProblem(
            "schedule.eval_every",
            f"validation every {recipe.schedule.eval_every} steps but there are no validation "
            "prompts", "set data.val to a prompt file, or schedule.eval_every = 0"))
    for split in ("train", "val"):
        value = getattr(data, split)
        paths = value if isinstance(value, list) else [value] if value is not None else []
        for i, path in enumerate(paths):
            # files are read when training starts; the format is known from the name now
            if path.suffix not in ("", ".parquet", ".jsonl") and not path.is_dir():
                where = f"data.{split}" + (f"[{i}]" if isinstance(value, list) else "")
                out.append(ConfigProblem(
                    where, f"{str(path)!r} is not a format rlctl reads",
                    "give a .parquet or .jsonl file, or a directory saved by HF datasets "
                    "(Dataset.save_to_disk)"))
    return out


def _estimator_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    alg = recipe.algorithm
    reg = registry.find("advantage_estimator", alg.estimator)
    if reg is None:  # reported by check_selections
        return []
    out: list[ConfigProblem] = []
    requires = frozenset(reg.metadata.get("requires", ()))
    if "values" in requires and not recipe.critic.enabled:
        without = [r.name for r in registry.all("advantage_estimator")
                   if "values" not in frozenset(r.metadata.get("requires", ()))]
        out.append(ConfigProblem(
            "algorithm.estimator",
            f'estimator "{alg.estimator}" needs values from a critic, but critic.enabled = false',
            "set [critic] enabled = true, or choose an estimator that needs no critic"
            + (f" ({', '.join(without)})" if without else "")))
    if reg.metadata.get("group_based") and alg.group_size < 2:
        out.append(ConfigProblem(
            "algorithm.group_size",
            f'estimator "{alg.estimator}" compares responses within a group, but group_size = '
            f"{alg.group_size}",
            "set algorithm.group_size >= 2 (e.g. 8), or choose an estimator that is not "
            "group-based (e.g. gae with a critic)"))
    return out


def _batch_problems(recipe: Recipe, model_parallel: int = 1) -> list[ConfigProblem]:
    alg, train = recipe.algorithm, recipe.engines.train
    # model-parallel peers share one slice of the minibatch: it splits over data-parallel ranks
    dp = max(train.ranks // max(model_parallel, 1), 1)
    over = (f"{dp} data-parallel ranks ({train.ranks} ranks / model-parallel {model_parallel})"
            if model_parallel > 1 else f"{train.ranks} ranks")
    samples = alg.prompts_per_step * alg.group_size
    out: list[ConfigProblem] = []
    if samples % alg.minibatches:
        out.append(ConfigProblem(
            "algorithm.minibatches",
            f"{samples} samples per step (prompts_per_step {alg.prompts_per_step} x group_size "
            f"{alg.group_size}) do not split into {alg.minibatches} equal minibatches",
            f"choose minibatches dividing {samples} ({_divisors(samples)})"))
        return out  # the per-rank checks below would only repeat the problem
    minibatch = samples // alg.minibatches
    if minibatch % dp:
        out.append(ConfigProblem(
            "engines.train.ranks",
            f"a minibatch of {minibatch} samples does not split evenly over {over}",
            f"choose ranks dividing {minibatch} ({_divisors(minibatch)}), or change "
            "algorithm.minibatches"))
        return out
    per_rank = minibatch // dp
    if train.micro_batch_size > per_rank:
        out.append(ConfigProblem(
            "engines.train.micro_batch_size",
            f"micro_batch_size {train.micro_batch_size} is larger than the per-rank minibatch "
            f"of {per_rank} samples ({minibatch} per minibatch / {over})",
            f"set engines.train.micro_batch_size <= {per_rank}"))
    return out


def _engine_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    out: list[ConfigProblem] = []
    res, train, rollout = recipe.resources, recipe.engines.train, recipe.engines.rollout
    devices = res.nodes * res.devices_per_node
    if res.mode == "ray" and train.ranks > devices:
        out.append(ConfigProblem(
            "engines.train.ranks",
            f"{train.ranks} training ranks but the cluster has {devices} devices "
            f"(resources.nodes {res.nodes} x devices_per_node {res.devices_per_node})",
            f"set resources.devices_per_node >= {-(-train.ranks // res.nodes)} or lower "
            "engines.train.ranks"))
    if rollout.weight_sync is not None:
        sync = registry.find("weight_sync", rollout.weight_sync)
        engines = tuple(sync.metadata.get("engines", ())) if sync is not None else ()
        if sync is not None and engines and rollout.backend not in engines:
            out.append(ConfigProblem(
                "engines.rollout.weight_sync",
                f'weight sync "{rollout.weight_sync}" does not support rollout engine '
                f'"{rollout.backend}" (it supports {", ".join(engines)})',
                "remove weight_sync to use the engine's default, or choose one that supports "
                f'"{rollout.backend}"'))
    return out


def _logging_problems(recipe: Recipe) -> list[ConfigProblem]:
    sinks = recipe.logging.sinks
    dupes = sorted({s for s in sinks if sinks.count(s) > 1})
    if dupes:
        return [ConfigProblem("logging.sinks", f"sink listed twice: {', '.join(dupes)}",
                              "list each sink once")]
    return []


# --------------------------------------------------------------------------- plugin hooks


def hook_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    """Run every plugin's ``validate_config``; a plugin that raises is itself a problem."""
    out: list[ConfigProblem] = []
    for outcome in registry.call_each("validate_config", recipe=recipe):
        if outcome.error is not None:  # a buggy plugin must not hide the other problems
            error = outcome.error
            out.append(ConfigProblem(
                "", f"validate_config of plugin {outcome.plugin} raised "
                f"{type(error).__name__}: {error}", "report this to the plugin's authors",
                source=outcome.plugin))
            continue
        for item in outcome.result or ():
            if isinstance(item, ConfigProblem):
                out.append(item)
            else:
                out.append(ConfigProblem("", str(item), source=outcome.plugin))
    return out


__all__ = ["ConfigError", "ConfigProblem", "LoadedRecipe", "cross_field_problems",
           "hook_problems", "kind_words", "load_recipe", "validate_recipe"]
