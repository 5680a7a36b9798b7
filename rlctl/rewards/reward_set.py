"""The recipe's ``[[rewards]]`` as one callable: weighted sum plus each term on its own.

A reward runs where its registration's ``kind`` metadata says (:data:`REWARD_KINDS`); one
:class:`RewardSet` holds the terms of one kind, and the scores of all kinds add up in the
sample's ``score``: rule functions and judges in the rollout workers, then reward models in
the reward worker group, which adds its weighted terms to the score already written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlctl.plugin_errors import PluginCallError
from rlctl.rewards.base import RewardInput

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rlctl.config.recipe import RewardSection
    from rlctl.registry import Registration, Registry


# How a registered reward runs (its registration's ``kind`` metadata):
#   function - target(sample, **options) -> score, per sample, in the rollout workers;
#   judge    - target(options) -> judge; await judge(sample, ask) -> score, in the rollout
#              workers, asking the rollout engine (an LLM judge);
#   model    - target(options, device=) -> scorer; scorer(samples) -> [score, ...], batched,
#              in the reward worker group (a reward model).
REWARD_KINDS = ("function", "judge", "model")


def reward_kind(reg: Registration) -> str:
    """``function``, ``judge`` or ``model`` (see :data:`REWARD_KINDS`)."""
    return str(reg.metadata.get("kind", "function"))


@dataclass(frozen=True)
class _Term:
    name: str
    weight: float
    fn: Callable[..., Any]
    """The function (kind ``function``), or the judge / scorer built from the options."""
    options: dict[str, Any]
    """Keyword options of a function; empty for judges and scorers (built with them)."""
    reg: Registration
    """Who registered ``fn``: named in the error when it raises."""


class RewardSet:
    """Scores samples with every configured reward of one kind.

    Results are ``{"score": weighted sum, "<name>": raw score, "<name>/<k>": extra
    component ...}``, so that each reward is logged on its own (``reward/<name>``).
    """

    def __init__(self, terms: list[_Term]) -> None:
        self.terms = terms

    @classmethod
    def from_sections(
        cls,
        sections: list[RewardSection],
        registry: Registry,
        options: Sequence[BaseModel | None],
        *,
        kind: str = "function",
        device: str = "cpu",
    ) -> RewardSet:
        """The sections of one ``kind``; the others are scored elsewhere. ``device``: where
        a ``model`` scorer runs. ``options[i]``: the options of ``sections[i]`` as validated
        when the recipe was loaded (:meth:`rlctl.config.loaded.LoadedRecipe.options_for`
        ``"rewards[i].options"``; ``None`` where the reward registered no option model)."""
        if not sections:
            raise ValueError("no rewards configured: add a [[rewards]] table to the recipe")
        if len(options) != len(sections):
            raise ValueError(f"{len(sections)} reward sections but {len(options)} option sets")
        terms = []
        for section, validated in zip(sections, options, strict=True):
            reg = registry.get("reward_function", section.name)
            if reward_kind(reg) != kind:
                continue
            target = reg.load()
            if kind == "function":
                kwargs = validated.model_dump() if validated is not None else {}
                terms.append(_Term(section.name, section.weight, target, kwargs, reg))
                continue
            try:
                built = target(validated) if kind == "judge" else target(validated, device=device)
            except Exception as exc:
                raise PluginCallError.from_exception(reg, exc, target) from exc
            terms.append(_Term(section.name, section.weight, built, {}, reg))
        return cls(terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    def __call__(self, sample: RewardInput) -> dict[str, float]:
        """Score ``sample`` (kind ``function``); a reward that raises or returns a non-score
        is a :class:`PluginCallError` naming its plugin, name and (when it raised) file:line."""
        out: dict[str, float] = {}
        total = 0.0
        for term in self.terms:
            try:
                result = term.fn(sample, **term.options)
            except Exception as exc:
                raise PluginCallError.from_exception(term.reg, exc, term.fn) from exc
            score = score_of(term, result, out)
            out[term.name] = score
            total += term.weight * score
        out["score"] = total
        return out

    async def judge(self, sample: RewardInput, ask: Callable[..., Any]) -> dict[str, float]:
        """Score ``sample`` with every judge (kind ``judge``), in the recipe's order."""
        out: dict[str, float] = {}
        total = 0.0
        for term in self.terms:
            try:
                result = await term.fn(sample, ask)
            except Exception as exc:
                raise PluginCallError.from_exception(term.reg, exc, term.fn) from exc
            score = score_of(term, result, out)
            out[term.name] = score
            total += term.weight * score
        out["score"] = total
        return out

    def score_batch(self, samples: list[RewardInput]) -> list[dict[str, float]]:
        """Score ``samples`` with every scorer (kind ``model``): one result dict per sample."""
        outs: list[dict[str, float]] = [{"score": 0.0} for _ in samples]
        for term in self.terms:
            try:
                results = list(term.fn(samples))
            except Exception as exc:
                raise PluginCallError.from_exception(term.reg, exc, term.fn) from exc
            if len(results) != len(samples):
                raise PluginCallError.contract(
                    term.reg, f"returned {len(results)} scores for {len(samples)} samples")
            for out, result in zip(outs, results, strict=True):
                score = score_of(term, result, out)
                out[term.name] = score
                out["score"] += term.weight * score
        return outs


def score_of(term: Any, result: Any, out: dict[str, float]) -> float:
    """The score of one reward's result; its other dict entries go into ``out``.

    ``term`` has the ``name`` and ``reg`` of :class:`_Term` (model and judge terms too)."""
    if isinstance(result, dict) and "score" not in result:
        raise PluginCallError.contract(
            term.reg, f"returned a dict without 'score' (keys: {sorted(result)})")
    try:
        if isinstance(result, dict):
            parts = {f"{term.name}/{k}": float(v) for k, v in result.items() if k != "score"}
            score = float(result["score"])
        else:
            parts, score = {}, float(result)
    except (TypeError, ValueError) as exc:
        raise PluginCallError.contract(
            term.reg, f"returned {result!r}, not a float or a dict of floats with 'score' "
            f"({type(exc).__name__}: {exc})") from None
    out.update(parts)
    return score
