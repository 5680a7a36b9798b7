"""Cross-field checks of DAPO's settings (``[algorithm.dynamic_sampling]``,
``[algorithm.overlong]``), of model rewards, of the selected staleness policy and of what
partial rollouts need, run by :func:`rlctl.config.pipeline.load_recipe`.

Each problem names the TOML key, what is wrong and how to fix it, before any worker starts.
"""

from __future__ import annotations

from rlctl.config.problems import ConfigProblem, choose_from
from rlctl.config.recipe import Recipe
from rlctl.registry import Registry


def reward_names(recipe: Recipe, registry: Registry) -> list[str]:
    """The rewards a run scores with: ``[[rewards]]``, or the task's default reward."""
    if recipe.rewards:
        return [r.name for r in recipe.rewards]
    task = registry.find("task", recipe.data.task) if recipe.data.task else None
    default = task.metadata.get("reward") if task is not None else None
    return [default] if default else []


# A score is sum(weight x reward) (+ the overlong penalty), kept as float32 and squared by the
# group statistics (std): past ~1.8e19 that square is inf, and inf - inf is a NaN loss. With
# the scale of the weights below this bound, a reward may reach 1e12 before that happens, far
# beyond what a reward function returns. (1e308 for a weight trained on NaN from step 1.)
MAX_SCORE_SCALE = 1e6
# Dynamic sampling keeps prompts_per_step groups a step; a draw is at most this many steps'
# worth (verl's DAPO recipes draw 3x): a bigger one generates groups that are only cut, and
# 1e20 allocated for minutes before failing. More draws (max_draws) cover a low keep rate.
MAX_DRAW_FACTOR = 16


def sampling_and_reward_problems(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    return (_dynamic_sampling(recipe, registry) + _overlong(recipe)
            + _model_rewards(recipe, registry) + _score_scale(recipe))


def _score_scale(recipe: Recipe) -> list[ConfigProblem]:
    """Weights (and the overlong penalty) whose products with a reward overflow float32."""
    terms = [(f"rewards[{i}].weight", abs(r.weight)) for i, r in enumerate(recipe.rewards)]
    if recipe.algorithm.overlong.buffer_len:
        terms.append(("algorithm.overlong.penalty_factor",
                      recipe.algorithm.overlong.penalty_factor))
    scale = sum(value for _, value in terms)
    if scale <= MAX_SCORE_SCALE:
        return []
    key, value = max(terms, key=lambda t: t[1])
    return [ConfigProblem(
        key, f"{value:g} makes the score's scale {scale:g} (the sum of |weight| and the "
        f"overlong penalty_factor): a reward of 1 times it leaves float32 once the group "
        "statistics square it, and the run trains on NaN",
        f"keep the sum at most {MAX_SCORE_SCALE:g}: scale rewards down rather than up (only "
        "the ratio of the weights matters to normalised advantages)")]


def _dynamic_sampling(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    alg = recipe.algorithm
    ds = alg.dynamic_sampling
    key = "algorithm.dynamic_sampling"
    if not ds.enabled:
        if ds.prompts_per_draw is not None:
            return [ConfigProblem(f"{key}.prompts_per_draw", "set, but dynamic sampling is off "
                                  "(each step draws prompts_per_step prompts)",
                                  f"set {key}.enabled = true, or remove prompts_per_draw")]
        return []
    out: list[ConfigProblem] = []
    most = MAX_DRAW_FACTOR * alg.prompts_per_step
    if ds.prompts_per_draw is not None and ds.prompts_per_draw > most:
        out.append(ConfigProblem(
            f"{key}.prompts_per_draw", f"{ds.prompts_per_draw} prompts per draw is more than "
            f"{MAX_DRAW_FACTOR} steps' worth (prompts_per_step = {alg.prompts_per_step}): a "
            "step keeps prompts_per_step groups and cuts the rest",
            f"set prompts_per_draw <= {most} (DAPO draws about 3x prompts_per_step), and "
            "raise max_draws if too few groups are kept"))
    if alg.group_size < 2:
        out.append(ConfigProblem(
            f"{key}.enabled", f"group_size = {alg.group_size}: a group of one response is "
            "always kept, so there is nothing to filter",
            "set algorithm.group_size >= 2, or dynamic_sampling.enabled = false"))
    names = reward_names(recipe, registry)
    metrics = ["score", *names] + (["overlong"] if alg.overlong.buffer_len else [])
    base = ds.metric.split("/", 1)[0]
    # "<reward>/<part>" names a component the reward returns: only its reward can be checked
    if ds.metric not in metrics and (base == ds.metric or base not in names):
        out.append(ConfigProblem(
            f"{key}.metric", f'"{ds.metric}" is neither score nor one of the rewards',
            choose_from(ds.metric, metrics, what="metrics") + ", or <reward>/<component>"))
    return out


def _overlong(recipe: Recipe) -> list[ConfigProblem]:
    ol = recipe.algorithm.overlong
    key = "algorithm.overlong"
    if not ol.buffer_len:
        if ol.max_tokens is not None:
            return [ConfigProblem(f"{key}.max_tokens", "set, but the overlong punishment is off "
                                  "(buffer_len = 0)",
                                  f"set {key}.buffer_len, or remove max_tokens")]
        return []
    max_tokens = ol.max_tokens or recipe.rollout.max_new_tokens
    if ol.buffer_len > max_tokens:
        where = "max_tokens" if ol.max_tokens else "rollout.max_new_tokens"
        return [ConfigProblem(
            f"{key}.buffer_len", f"{ol.buffer_len} tokens is longer than the {max_tokens} the "
            f"buffer ends at ({where}): every response would be punished",
            f"set buffer_len <= {max_tokens} (DAPO uses a quarter to a half of it)")]
    return []


def _model_rewards(recipe: Recipe, registry: Registry) -> list[ConfigProblem]:
    out: list[ConfigProblem] = []
    seen: set[str] = set()
    for i, reward in enumerate(recipe.rewards):
        reg = registry.find("reward_function", reward.name)
        if reg is None:
            continue  # reported by check_selections
        # registration metadata "kind" (rlctl.rewards.reward_set.REWARD_KINDS)
        if reg.metadata.get("kind", "function") != "function" and reward.name in seen:
            out.append(ConfigProblem(
                f"rewards[{i}].name", f'"{reward.name}" is listed twice; its scores would be '
                f"logged as one (reward/{reward.name})", "list each model reward or judge once"))
        seen.add(reward.name)
    return out


def staleness_policy_problems(recipe: Recipe, registry: Registry,
                              validated: dict[str, object]) -> list[ConfigProblem]:
    """The selected staleness policy, built from its options, against its kind's contract
    (a plugin's mistake is named here, at load, not at step 1); and what partial rollouts
    need (a policy that streams, Ray mode, an engine that can abort requests)."""
    from rlctl.hookspecs import PLUGIN_KINDS
    from rlctl.plugin_contracts import contract_problems, where_defined
    from rlctl.registry_targets import resolve

    reg = registry.find("staleness_policy", recipe.algorithm.staleness.policy)
    if reg is None or reg.target_problem() is not None:
        return []  # reported by check_selections
    key, contract = "algorithm.staleness.policy", PLUGIN_KINDS["staleness_policy"].contract
    try:
        policy = reg.load()(validated.get("algorithm.staleness.options"))
    except Exception as exc:  # noqa: BLE001 - the plugin's own error, named with it
        return [ConfigProblem(key, f"{reg.describe()} could not be built from its options: "
                              f"{type(exc).__name__}: {exc}", "fix the policy or its options")]
    missing = contract_problems(policy, resolve(contract))
    if missing:
        return [ConfigProblem(
            key, f"{reg.describe()} (defined at {where_defined(policy)}) lacks what the trainer "
            f"reads: {', '.join(missing)}", f"implement {contract.replace(':', '.')}, or "
            "subclass rlctl.algorithms.staleness.StalenessPolicy for its defaults "
            "(docs/plugins.md)")]
    return _partial_rollout(recipe, registry, policy.lookahead > 0)


def _partial_rollout(recipe: Recipe, registry: Registry, streaming: bool) -> list[ConfigProblem]:
    """``partial_rollout = "resume"`` aborts the requests in flight at a weight update: there
    must be some (streaming, Ray mode) and the engine must be able to abort and resume them
    (registration metadata ``partial_rollout``: the server engines)."""
    if recipe.algorithm.staleness.partial_rollout != "resume":
        return []
    key, finish = "algorithm.staleness.partial_rollout", 'or partial_rollout = "finish"'
    if not streaming:
        policy = recipe.algorithm.staleness.policy
        return [ConfigProblem(key, f'"resume" aborts the requests in flight at a weight update, '
                              f"but policy {policy!r} trains in lock step: no request is in "
                              "flight when the weights change",
                              f'set [algorithm.staleness] policy = "bounded", {finish}')]
    if recipe.resources.mode == "local":
        return [ConfigProblem(key, '"resume" aborts the requests in flight at a weight update, '
                              'but resources.mode = "local" (--local) runs each generate call '
                              "to its end when it is submitted: none is in flight then",
                              f'run in Ray mode (resources.mode = "ray"), {finish}')]
    backend = recipe.engines.rollout.backend
    engine = registry.find("rollout_engine", backend)
    if engine is not None and not engine.metadata.get("partial_rollout", False):
        able = sorted(e.name for e in registry.all("rollout_engine")
                      if e.metadata.get("partial_rollout", False))
        return [ConfigProblem(key, f'"resume" needs a rollout engine that can abort requests '
                              f"and resume them, and {backend!r} cannot",
                              f"use engines.rollout.backend = one of {able}, {finish}")]
    return []
