"""The migrated recipe as TOML, commented like rlctl's own recipes: a header saying what it is
and how to run it, and after each value the verl key it came from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlctl.config.render import render_toml

# Section order of rlctl's recipes (recipes/*.toml)
ORDER = ("run", "model", "critic", "data", "algorithm", "rollout", "rewards", "engines",
         "data_plane", "resources", "schedule", "logging")


def _ordered(recipe: Mapping[str, Any]) -> dict[str, Any]:
    return {k: recipe[k] for k in sorted(recipe, key=lambda k: ORDER.index(k)
                                         if k in ORDER else len(ORDER))}


def render_recipe(recipe: Mapping[str, Any], comments: Mapping[str, str], *, out_name: str,
                  command: Sequence[str], summary: str) -> str:
    """TOML text of ``recipe`` with a header and a ``# verl key`` comment on every value."""

    def source_of(loc: tuple[str | int, ...]) -> str:
        parts = [str(p) for p in loc if isinstance(p, str)]
        while parts:  # a value inside a table written whole takes the table's comment
            comment = comments.get(".".join(parts))
            if comment is not None:
                return comment
            parts.pop()
        return ""

    body = render_toml(_ordered(recipe), source_of)
    body = "\n".join(line.rstrip().removesuffix("#").rstrip() for line in body.splitlines())
    name = recipe.get("run", {}).get("name", "verl-run")
    made_by = " ".join(command)
    header = [
        f"# {name}: migrated from verl by `rlctl config migrate`.",
        "#",
        f"# verl run:  {summary}",
        f"# Made by:   {made_by}",
        "# After each value: the verl key it came from (actor., rollout., ref., model. are under",
        "# actor_rollout_ref). The migration report accounts for every verl key: mapped, dropped",
        "# (no effect here) or unsupported, and why.",
        "#",
        f"# Run:       rlctl train {out_name}",
        f"# Check:     rlctl config validate {out_name}",
        f"# Inspect:   rlctl config show {out_name}   (derived batch numbers = verl's)",
    ]
    return "\n".join(header) + "\n\n" + body + "\n"
