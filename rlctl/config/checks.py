"""Cross-field checks: what involves several fields of a recipe or the registry's metadata
(stage 3 of :mod:`rlctl.config.pipeline`), and the plugins' ``validate_config`` hooks (stage 4).
"""

from __future__ import annotations

from rlctl.config.lora_checks import lora_problems
from rlctl.config.problems import ConfigProblem
from rlctl.config.recipe import Recipe
from rlctl.config.reward_checks import sampling_and_reward_problems
from rlctl.registry import Registry

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
    problems += lora_problems(recipe, registry)
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
    rollout = recipe.engines.rollout
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

