"""verl's defaults per release, shipped as data (``verl_defaults/*.yaml``), and which release a
config comes from.

A migration refuses only what the user changed from verl's defaults, so it needs verl's
defaults for the release the config was made with. The data files are verl's published
generated trainer configs (``_generated_ppo_trainer.yaml``, ``_generated_ppo_megatron_trainer
.yaml``) and the config-group choices of its ``ppo_trainer.yaml``, one file per release, each
naming the repository, commit and paths it came from (``scripts/verl_defaults.py`` makes them).

:func:`detect` finds the release and variant (FSDP or Megatron) a config's leaves agree with
most; a config equal to one of them is that release's own generated config.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Variant = Literal["fsdp", "megatron"]
VARIANTS: tuple[Variant, ...] = ("fsdp", "megatron")
GENERATED_HEADER = "automatically generated via 'scripts/generate_trainer_config.sh'"
"""verl's generated trainer configs start with this line (and ask not to be edited)."""


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; empty tables and lists are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = tree.get(part)
        if not isinstance(child, dict):
            child = tree[part] = {}
        tree = child
    tree[leaf] = value


def _delete(tree: dict[str, Any], dotted: str) -> None:
    """Delete a leaf, and the tables its deletion leaves empty."""
    *parents, leaf = dotted.split(".")
    path = [tree]
    for part in parents:
        path.append(path[-1][part])
    del path[-1][leaf]
    for table, part in zip(reversed(path[:-1]), reversed(parents), strict=True):
        if table[part]:
            break
        del table[part]


@dataclass(frozen=True)
class Release:
    """verl's defaults at one release (or one commit of its main branch)."""

    name: str
    """``v0.9.0``, or ``main`` for the main-branch commit shipped."""
    commit: str
    configs: dict[str, dict[str, Any]]
    """Variant -> the generated config (nested, interpolations unresolved)."""
    groups: dict[str, dict[str, str]]
    """Config group (``model_engine``, ``actor@actor_rollout_ref.actor``) -> variant -> choice."""

    @property
    def label(self) -> str:
        return f"{self.name}@{self.commit[:8]}" if self.name == "main" else self.name

    def config(self, variant: Variant) -> dict[str, Any]:
        """A fresh copy of the variant's config, to compose a run on."""
        return copy.deepcopy(self.configs[variant])

    def leaves(self, variant: Variant) -> dict[str, Any]:
        return _leaves_of(self.name, variant)


@cache
def releases() -> tuple[Release, ...]:
    """Every shipped release, oldest first (``main`` last)."""
    import yaml

    out = []
    folder = resources.files("rlctl.migrate") / "verl_defaults"
    for entry in folder.iterdir():
        if not entry.name.endswith(".yaml"):
            continue
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it
        data = yaml.load(entry.read_text(encoding="utf-8"), Loader=loader)
        fsdp = data["fsdp"]
        megatron = copy.deepcopy(fsdp)
        for key in data["megatron_delta"]["removed"]:
            _delete(megatron, key)
        for key, value in data["megatron_delta"]["set"].items():
            _set(megatron, key, value)
        out.append(Release(data["release"], data["commit"],
                           {"fsdp": fsdp, "megatron": megatron}, data["groups"]))
    return tuple(sorted(out, key=_order))


def _order(release: Release) -> tuple[int, ...]:
    if release.name == "main":
        return (1 << 30,)
    return tuple(int(p) for p in release.name.lstrip("v").split(".") if p.isdigit())


@cache
def _leaves_of(name: str, variant: Variant) -> dict[str, Any]:
    return leaves(by_name(name).configs[variant])


def names() -> list[str]:
    return [r.name for r in releases()]


def by_name(name: str) -> Release:
    for r in releases():
        if r.name == name or r.label == name:
            return r
    raise KeyError(name)


@dataclass(frozen=True)
class Match:
    """How a config's leaves compare with a release's defaults."""

    release: Release
    variant: Variant
    differing: int
    """Leaves whose value differs, plus leaves only one side has."""

    @property
    def exact(self) -> bool:
        return self.differing == 0


def compare(raw: dict[str, Any], release: Release, variant: Variant) -> Match:
    defaults = release.leaves(variant)
    differing = sum(1 for k, v in raw.items() if k not in defaults or not same(v, defaults[k]))
    differing += sum(1 for k in defaults if k not in raw)
    return Match(release, variant, differing)


def detect(raw: dict[str, Any]) -> Match:
    """The release and variant whose defaults differ from ``raw`` (leaf -> raw value) least."""
    matches = [compare(raw, r, v) for r in releases() for v in VARIANTS]
    # fewest differences; on a tie the newer release
    return min(matches, key=lambda m: (m.differing, -releases().index(m.release)))


def same(a: Any, b: Any) -> bool:
    """Equal as verl reads them: ``1 == 1.0``, but ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
