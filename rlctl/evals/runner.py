"""``rlctl eval``: score a model on a recipe's held-out prompts with a rollout engine.

What is scored is the recipe's: the held-out split (``[data] val``, or the task's ``val``
split) and its first ``data.val_size`` prompts, formatted like training formats them (chat
template included), the recipe's rule rewards, ``rollout.max_new_tokens``, and the engine
``[engines.rollout] backend`` (``hf`` in this process; ``vllm`` / ``sglang`` start their
servers and stop them after). Only the model changes: :func:`evaluate` takes any checkpoint
directory (:mod:`rlctl.evals.model_source` turns a catalog name, a run, a checkpoint or an
export into one).

Two passes: one greedy response per prompt (``pass@1``), then, when ``k > 0``, ``k`` sampled
responses per prompt at ``temperature`` (``mean@k``, ``pass@k``); metrics and intervals are
:mod:`rlctl.algorithms.accuracy`', the same ones validation logs during training.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rlctl.algorithms.accuracy import accuracy_metrics, accuracy_partials, group_scores
from rlctl.config.loaded import LoadedRecipe

if TYPE_CHECKING:  # the engine module imports torch: not at `rlctl eval --help`
    from rlctl.engines.rollout.contract import RolloutEngine


class EvalSetupError(ValueError):
    """The recipe cannot be evaluated as asked (a usage problem: exit 2)."""


@dataclass
class EvalPass:
    """One pass over the held-out prompts."""

    name: str
    """``greedy`` or ``sampled``."""
    responses_per_prompt: int
    temperature: float
    metrics: dict[str, float]
    """``pass@1`` (greedy) or ``mean@k`` / ``pass@k``, each with ``/ci_low`` and ``/ci_high``,
    plus ``score`` (mean reward) and ``response_length`` (mean generated tokens)."""
    generated_tokens: int
    seconds: float


@dataclass
class EvalResult:
    """Everything ``rlctl eval`` reports."""

    model: str
    task: str
    backend: str
    prompts: int
    passes: list[EvalPass] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    """The first few greedy responses with their scores (to see what the model writes)."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def check_evaluable(loaded: LoadedRecipe) -> None:
    """Refuse recipes ``rlctl eval`` cannot score, before anything is loaded."""
    from rlctl.registry import get_registry
    from rlctl.rewards.reward_set import reward_kind
    from rlctl.trainer.worker.reward_sections import effective_rewards

    recipe = loaded.recipe
    if recipe.rollout.agent_loop != "single_turn":
        raise EvalSetupError(
            f"rollout.agent_loop = {recipe.rollout.agent_loop!r}: rlctl eval scores single-turn "
            "responses; validate multi-turn agents during training (schedule.eval_every)")
    if recipe.data.task is None and recipe.data.val is None:
        raise EvalSetupError("the recipe has no held-out prompts: set data.val to a prompt "
                             "file, or use a [data] task (its val split)")
    registry = get_registry()
    for section in effective_rewards(recipe, registry):
        kind = reward_kind(registry.get("reward_function", section.name))
        if kind != "function":
            raise EvalSetupError(
                f"reward {section.name!r} is a {kind}: rlctl eval scores with rule rewards "
                "(functions of the response); evaluate with those, or during training")


def held_out_prompts(loaded: LoadedRecipe, count: int) -> list[Any]:
    """The first ``count`` prompts of the recipe's held-out split (the same on every call)."""
    from rlctl.trainer.controller.prompts import open_prompt_source

    source = open_prompt_source(loaded.recipe, split="val",
                                task_options=loaded.options_for("data.task_options"))
    stream = iter(source)
    return [next(stream) for _ in range(count)]


def evaluate(
    loaded: LoadedRecipe, model_dir: str, *, k: int = 0, temperature: float = 1.0,
    prompts: int | None = None, model_label: str | None = None, examples: int = 3,
) -> EvalResult:
    """Score ``model_dir`` (an HF checkpoint directory) on the recipe's held-out prompts."""
    from rlctl.models.loading import load_tokenizer
    from rlctl.tasks import tokenize_prompts

    check_evaluable(loaded)
    recipe = loaded.recipe
    model = recipe.model.model_copy(update={"path": model_dir})
    evaluated = recipe.model_copy(update={"model": model})
    count = prompts if prompts is not None else recipe.data.val_size
    held_out = held_out_prompts(loaded, count)
    tokenizer = load_tokenizer(model)
    ids = tokenize_prompts(held_out, tokenizer, apply_chat_template=recipe.data.apply_chat_template,
                           max_prompt_tokens=recipe.data.max_prompt_tokens)
    rewards = _reward_set(loaded)
    engine = _engine(loaded, evaluated)
    result = EvalResult(model=model_label or model_dir,
                        task=recipe.data.task or str(recipe.data.val),
                        backend=recipe.engines.rollout.backend, prompts=len(held_out))
    try:
        plans = [("greedy", 1, 0.0)] + ([("sampled", k, temperature)] if k > 0 else [])
        for name, n, temp in plans:
            scored, spent = _generate_and_score(engine, recipe, tokenizer, rewards, held_out,
                                                ids, n=n, temperature=temp)
            result.passes.append(_summarise(name, n, temp, scored, spent,
                                            recipe.rollout.val_correct_score))
            if name == "greedy":
                result.examples = [
                    {"prompt": tokenizer.decode(ids[i], skip_special_tokens=False),
                     "response": s["text"], "answer": held_out[i].ground_truth["ground_truth"],
                     "score": s["score"]}
                    for i, s in enumerate(scored[:examples])]
    finally:
        engine.close()  # the contract's (server engines stop their servers)
    return result


def _reward_set(loaded: LoadedRecipe) -> Any:
    from rlctl.registry import get_registry
    from rlctl.rewards.reward_set import RewardSet
    from rlctl.trainer.worker.reward_sections import effective_rewards

    sections = effective_rewards(loaded.recipe, get_registry())
    options = [loaded.options_for(f"rewards[{i}].options") for i in range(len(sections))]
    return RewardSet.from_sections(sections, get_registry(), options)


def _engine(loaded: LoadedRecipe, evaluated: Any) -> RolloutEngine:
    from rlctl.engines.rollout.contract import RolloutEngineSpec
    from rlctl.registry import get_registry
    from rlctl.trainer.worker.device import pick_device

    engine_cls = get_registry().load("rollout_engine", evaluated.engines.rollout.backend)
    spec = RolloutEngineSpec.from_loaded(loaded, device=pick_device(evaluated))
    # the model evaluated, not the recipe's (same architecture); all its replicas, one worker
    engine = engine_cls(replace(spec, model=evaluated.model,
                                replicas=evaluated.engines.rollout.replicas))
    engine.load()
    return engine


def _generate_and_score(
    engine: RolloutEngine, recipe: Any, tokenizer: Any, rewards: Any, held_out: Sequence[Any],
    ids: Sequence[list[int]], *, n: int, temperature: float,
) -> tuple[list[dict[str, Any]], float]:
    """``n`` responses per prompt (each prompt's together), scored; and the seconds taken."""
    from rlctl.rewards.base import RewardInput

    r = recipe.rollout
    requests = [p for p in ids for _ in range(n)]
    started = time.perf_counter()
    gens = engine.generate_batch(requests, max_new_tokens=r.max_new_tokens,
                                 temperature=temperature, top_p=r.top_p if temperature else 1.0,
                                 top_k=r.top_k if temperature else 0, seed=recipe.run.seed)
    spent = time.perf_counter() - started
    eos = tokenizer.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    scored = []
    for i, gen in enumerate(gens):
        prompt = held_out[i // n]
        sample = RewardInput.from_tokens(
            tokenizer, prompt_ids=requests[i], response_ids=gen.token_ids,
            ground_truth=prompt.ground_truth, data_source=prompt.data_source,
            eos_token_ids=eos_ids)
        scored.append({"uid": str(i // n), "score": float(rewards(sample)["score"]),
                       "tokens": len(gen.token_ids), "text": sample.response_text})
    return scored, spent


def _summarise(name: str, n: int, temperature: float, scored: list[dict[str, Any]],
               seconds: float, correct_score: float) -> EvalPass:
    groups = group_scores([s["uid"] for s in scored], [s["score"] for s in scored])
    metrics = accuracy_metrics(accuracy_partials(groups, correct_score=correct_score,
                                                 greedy=temperature == 0))
    metrics.pop("prompts", None)
    tokens = sum(s["tokens"] for s in scored)
    metrics["score"] = sum(s["score"] for s in scored) / max(len(scored), 1)
    metrics["response_length"] = tokens / max(len(scored), 1)
    return EvalPass(name=name, responses_per_prompt=n, temperature=temperature,
                    metrics=metrics, generated_tokens=tokens, seconds=seconds)


def format_table(result: EvalResult) -> str:
    """The result as a small table (the JSON has everything)."""
    title = (f"{result.model} on {result.task}: {result.prompts} held-out prompts, "
             f"{result.backend} engine")
    header = (f"{'metric':<18}{'value':>8}{'95% interval':>20}{'responses':>11}"
              f"{'mean len':>10}{'tok/s':>8}")
    lines = [title, header]
    for p in result.passes:
        for metric in [m for m in p.metrics if m.startswith(("pass@", "mean@"))
                       and "/ci_" not in m]:
            low, high = p.metrics[f"{metric}/ci_low"], p.metrics[f"{metric}/ci_high"]
            label = f"{metric} ({'greedy' if p.temperature == 0 else f't={p.temperature:g}'})"
            lines.append(
                f"{label:<18}{p.metrics[metric]:>8.3f}{f'[{low:.3f}, {high:.3f}]':>20}"
                f"{p.responses_per_prompt * result.prompts:>11}"
                f"{p.metrics['response_length']:>10.1f}"
                f"{p.generated_tokens / max(p.seconds, 1e-9):>8.0f}")
    return "\n".join(lines)
