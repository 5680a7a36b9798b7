"""A verl config as verl's ``main_ppo`` would see it: YAML + Hydra overrides, resolved.

The input YAML is verl's composed config (``_generated_ppo_trainer.yaml``, or ``--cfg job``
output). Overrides are parsed by Hydra's own override parser (verl's launch scripts are
Hydra command lines) and applied with Hydra's rules: ``key=value`` must name an existing
key, ``+key=value`` adds a new one, ``++key=value`` sets either way, ``~key`` deletes. Then
OmegaConf resolves the interpolations (``${oc.select:...}``), as verl does when it reads the
config, so a derived key (``critic.ppo_mini_batch_size``) sees the overridden value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MISSING = "???"  # OmegaConf's mandatory-value marker


class VerlConfigError(ValueError):
    """A YAML that does not load, or an override Hydra would refuse."""


@dataclass(frozen=True)
class Override:
    """One Hydra override and where it came from."""

    text: str
    origin: str
    """``script.sh``, ``overrides.txt:3`` or ``argument``."""


@dataclass
class VerlConfig:
    """Resolved leaf values keyed by dotted path, and which of them the overrides touched."""

    values: dict[str, Any]
    """Leaf key -> resolved value (lists and empty tables are leaves)."""
    base: dict[str, Any]
    """Leaf key -> value in the YAML before the overrides (absent for added keys)."""
    touched: dict[str, Override] = field(default_factory=dict)
    """Leaf key -> the override that set it (or a table above it)."""
    hydra_keys: list[Override] = field(default_factory=list)
    """Overrides of Hydra's own settings (``hydra.*``): no effect on the run's config."""

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def changed(self, key: str) -> bool:
        """Set by an override, or different from the YAML (an interpolation that moved)."""
        return key in self.touched or self.base.get(key, object()) != self.values.get(key)

    def under(self, prefix: str) -> Iterator[str]:
        """Leaf keys equal to ``prefix`` or below it."""
        dotted = prefix + "."
        return (k for k in self.values if k == prefix or k.startswith(dotted))


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def _exists(cfg: Any, key: str) -> bool:
    from omegaconf import OmegaConf

    node: Any = cfg
    for part in key.split("."):
        if not OmegaConf.is_dict(node) or part not in node.keys():  # noqa: SIM118 -- `in` hides ???
            return False
        node = node._get_node(part)  # raw node: no interpolation resolved on the way
    return True


def _resolved(cfg: Any, what: str) -> dict[str, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except OmegaConfBaseException as exc:
        raise VerlConfigError(f"{what}: an interpolation does not resolve: {exc}") from None
    return dict(_leaves(data))


def load_verl_config(path: str | Path, overrides: Sequence[Override]) -> VerlConfig:
    """Load ``path``, apply ``overrides`` in order, resolve; raises :class:`VerlConfigError`."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    if not path.is_file():
        raise VerlConfigError(f"{path}: verl config not found")
    try:
        cfg = OmegaConf.load(path)
    except (OmegaConfBaseException, ValueError, OSError) as exc:
        raise VerlConfigError(f"{path}: not a YAML config OmegaConf can load: {exc}") from None
    if not OmegaConf.is_dict(cfg) or "actor_rollout_ref" not in cfg:
        raise VerlConfigError(
            f"{path}: no actor_rollout_ref section; give verl's composed trainer config "
            "(e.g. verl/trainer/config/_generated_ppo_trainer.yaml, or `main_ppo --cfg job` output)"
        )
    base = _resolved(cfg, str(path))
    touched_prefixes: dict[str, Override] = {}
    hydra_keys: list[Override] = []
    for override in overrides:
        key = _apply(cfg, override)
        if key is None:
            hydra_keys.append(override)
        else:
            touched_prefixes[key] = override
    values = _resolved(cfg, f"{path} with the overrides")
    touched: dict[str, Override] = {}
    for leaf in values:
        for prefix, override in touched_prefixes.items():
            if leaf == prefix or leaf.startswith(prefix + "."):
                touched[leaf] = override
    return VerlConfig(values=values, base=base, touched=touched, hydra_keys=hydra_keys)


def _apply(cfg: Any, override: Override) -> str | None:
    """Apply one override like Hydra; returns its key (``None`` for Hydra's own settings)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = f"{override.text!r} ({override.origin})"
    try:
        parsed = OverridesParser.create().parse_override(override.text)
    except HydraException as exc:
        first = str(exc).strip().splitlines()[0]
        raise VerlConfigError(f"{where}: not a Hydra override: {first}") from None
    if parsed.is_sweep_override():
        raise VerlConfigError(f"{where}: a multirun sweep is many configs, not one; give one value")
    if parsed.package is not None:
        raise VerlConfigError(f"{where}: config-group overrides (key@package) are not supported")
    key = parsed.key_or_group
    if key == "hydra" or key.startswith("hydra."):
        return None
    exists = _exists(cfg, key)
    try:
        if parsed.type == OverrideType.DEL:
            if not exists:
                raise VerlConfigError(f"{where}: cannot delete {key}: it is not in the config")
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            del node[leaf]
            return key
        value = parsed.value()
        if parsed.type == OverrideType.CHANGE and not exists:
            raise VerlConfigError(
                f"{where}: {key} is not in the verl config; Hydra refuses to add keys without "
                f"+ (write +{override.text} if the key is meant to be new)")
        if parsed.type == OverrideType.ADD and exists:
            raise VerlConfigError(
                f"{where}: {key} is already in the verl config; Hydra refuses + on an existing "
                f"key (write {override.text.lstrip('+')}, or ++ to set it either way)")
        OmegaConf.update(cfg, key, value, merge=True, force_add=True)
    except OmegaConfBaseException as exc:
        raise VerlConfigError(f"{where}: {exc}") from None
    return key
