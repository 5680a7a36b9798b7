"""The recipe's ``[[rewards]]`` as one callable: weighted sum plus each term on its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlctl.plugin_errors import PluginCallError
from rlctl.rewards.base import RewardInput

if TYPE_CHECKING:
    from rlctl.config.recipe import RewardSection
    from rlctl.registry import Registration, Registry


@dataclass(frozen=True)
class _Term:
    name: str
    weight: float
    fn: Callable[..., Any]
    options: dict[str, Any]
    reg: Registration
    """Who registered ``fn``: named in the error when it raises."""


class RewardSet:
    """Scores a sample with every configured reward.

    ``__call__`` returns ``{"score": weighted sum, "<name>": raw score, "<name>/<k>": extra
    component ...}``, so that each reward is logged on its own (``critic/rewards/<name>``).
    """

    def __init__(self, terms: list[_Term]) -> None:
        if not terms:
            raise ValueError("no rewards configured: add a [[rewards]] table to the recipe")
        self.terms = terms

    @classmethod
    def from_sections(
        cls, sections: list[RewardSection], registry: Registry, options: Sequence[Mapping[str, Any]]
    ) -> RewardSet:
        """``options[i]``: the validated options of ``sections[i]`` as keywords (validated when
        the recipe was loaded, see :meth:`rlctl.config.loaded.LoadedRecipe.option_kwargs`)."""
        if len(options) != len(sections):
            raise ValueError(f"{len(sections)} reward sections but {len(options)} option sets")
        terms = []
        for section, opts in zip(sections, options, strict=True):
            reg = registry.get("reward_function", section.name)
            terms.append(_Term(section.name, section.weight, reg.load(), dict(opts), reg))
        return cls(terms)

    def __call__(self, sample: RewardInput) -> dict[str, float]:
        """Score ``sample``; a reward that raises or returns a non-score is a
        :class:`PluginCallError` naming its plugin, name and (when it raised) file:line."""
        out: dict[str, float] = {}
        total = 0.0
        for term in self.terms:
            try:
                result = term.fn(sample, **term.options)
            except Exception as exc:
                raise PluginCallError.from_exception(term.reg, exc, term.fn) from exc
            score = _score_of(term, result, out)
            out[term.name] = score
            total += term.weight * score
        out["score"] = total
        return out


def _score_of(term: _Term, result: Any, out: dict[str, float]) -> float:
    """The score of one reward's result; its other dict entries go into ``out``."""
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
