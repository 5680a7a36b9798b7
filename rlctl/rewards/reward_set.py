"""The recipe's ``[[rewards]]`` as one callable: weighted sum plus each term on its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlctl.rewards.base import RewardInput

if TYPE_CHECKING:
    from rlctl.config.recipe import RewardSection
    from rlctl.registry import Registry


@dataclass(frozen=True)
class _Term:
    name: str
    weight: float
    fn: Callable[..., Any]
    options: dict[str, Any]


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
        terms = [
            _Term(section.name, section.weight, registry.load("reward_function", section.name),
                  dict(opts))
            for section, opts in zip(sections, options, strict=True)
        ]
        return cls(terms)

    def __call__(self, sample: RewardInput) -> dict[str, float]:
        out: dict[str, float] = {}
        total = 0.0
        for term in self.terms:
            result = term.fn(sample, **term.options)
            if isinstance(result, dict):
                if "score" not in result:
                    raise ValueError(
                        f"reward {term.name!r} returned a dict without 'score': {sorted(result)}"
                    )
                score = float(result["score"])
                for key, value in result.items():
                    if key != "score":
                        out[f"{term.name}/{key}"] = float(value)
            else:
                score = float(result)
            out[term.name] = score
            total += term.weight * score
        out["score"] = total
        return out
