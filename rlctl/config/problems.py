"""Config problems: what is wrong, where (the TOML key path), and how to fix it.

Every stage of loading (files, overrides, section validation, plugin options, cross-field
checks, ``validate_config`` hooks) reports :class:`ConfigProblem` values; they are collected
and raised together as one :class:`ConfigError`, so a user sees every problem at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a recipe."""

    path: str
    """TOML key path, e.g. ``algorithm.kl.in`` or ``rewards[0].name`` ("" for a whole file)."""
    message: str
    """What is wrong, in one sentence."""
    fix: str = ""
    """How to fix it."""
    source: str | None = None
    """Where the offending value came from: a file (``x.toml:3:5``), ``env RLCTL_...`` or ``-s``."""

    def render(self) -> str:
        """Two lines: ``path: message (source)`` and ``  fix: ...``."""
        where = self.path or self.source or "recipe"
        head = f"{where}: {self.message}"
        if self.path and self.source:
            head += f"  [from {self.source}]"
        return head + (f"\n    fix: {self.fix}" if self.fix else "")


class ConfigError(Exception):
    """A recipe with one or more problems; ``problems`` lists them all."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__(format_problems(self.problems))


def format_problems(problems: Sequence[ConfigProblem]) -> str:
    """The human report of ``problems`` (what the CLI prints on stderr)."""
    n = len(problems)
    lines = [f"error: the recipe has {n} problem{'s' if n != 1 else ''}:"]
    for problem in problems:
        lines.append("  " + problem.render().replace("\n", "\n  "))
    return "\n".join(lines)


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to ``word`` (typo repair), or ``None``."""
    candidates = list(candidates)
    lowered = {c.lower(): c for c in candidates}
    if word.lower() in lowered:  # a case slip is the most likely typo
        return lowered[word.lower()]
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def choose_from(word: str, candidates: Iterable[str], *, what: str) -> str:
    """A fix text: ``did you mean "x"? (valid <what>: a, b, c)``."""
    names = sorted(candidates)
    if not names:
        return f"no {what} are registered"
    listed = ", ".join(names)
    guess = did_you_mean(word, names)
    if guess is not None:
        return f'did you mean "{guess}"? (valid {what}: {listed})'
    return f"use one of the valid {what}: {listed}"


def key_path(loc: Iterable[str | int]) -> str:
    """``("rewards", 0, "name")`` -> ``rewards[0].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def dedupe(problems: Iterable[ConfigProblem]) -> list[ConfigProblem]:
    """Drop exact repeats while keeping order (several stages may spot the same thing)."""
    seen: set[tuple[str, str, str | None]] = set()
    out: list[ConfigProblem] = []
    for p in problems:
        if (p.path, p.message, p.source) not in seen:
            seen.add((p.path, p.message, p.source))
            out.append(p)
    return out
