"""A verl config as verl's ``main_ppo`` would see it: YAML + Hydra overrides, resolved, and
compared with verl's defaults.

The input YAML is verl's composed config (``_generated_ppo_trainer.yaml``, or ``--cfg job``
output). Overrides are parsed by Hydra's own override parser (verl's launch scripts are Hydra
command lines) and applied with Hydra's rules: ``key=value`` must name an existing key,
``+key=value`` adds a new one, ``++key=value`` sets either way, ``~key`` deletes. Config-group
choices (``model_engine=megatron``, ``actor@actor_rollout_ref.actor=megatron_actor``) and
``--config-name`` choose which of verl's generated configs the run starts from. Then OmegaConf
resolves the interpolations (``${oc.select:...}``), as verl does when it reads the config.

Each leaf is then *at verl's default* (for the release the config comes from, see
:mod:`verl_release`) or *changed* by the user, in an override or in their own YAML; a leaf
under a table whose ``enable`` / ``enabled`` is false is *off*, whatever its value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rlctl.migrate.inputs import MAX_YAML_BYTES, InputError, check_yaml, read_text
from rlctl.migrate.verl_release import GENERATED_HEADER, leaves, same
from rlctl.migrate.verl_sources import Baseline, GroupChoice, choose_base, split_groups

MISSING = "???"  # OmegaConf's mandatory-value marker
_NO_DEFAULT = object()


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
    """Resolved leaf values keyed by dotted path, and which of them the user changed."""

    values: dict[str, Any]
    """Leaf key -> resolved value (lists and empty tables are leaves)."""
    raw: dict[str, Any]
    """Leaf key -> value before interpolations are resolved."""
    defaults: dict[str, Any]
    """Leaf key -> verl's default (unresolved) for the baseline release."""
    baseline: Baseline
    touched: dict[str, Override] = field(default_factory=dict)
    """Leaf key -> the override that set it (or a table above it)."""
    hydra_keys: list[Override] = field(default_factory=list)
    """Overrides of Hydra's own settings (``hydra.*``): no effect on the run's config."""
    groups: list[GroupChoice] = field(default_factory=list)
    """Config-group choices the overrides made."""
    deleted: dict[str, Override] = field(default_factory=dict)
    """Keys (or tables) an override deleted (``~key``), and the override."""
    node: Any = None
    """The OmegaConf config, to evaluate a default's interpolation in this run's context."""

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def under(self, prefix: str) -> Iterator[str]:
        """Leaf keys equal to ``prefix`` or below it."""
        dotted = prefix + "."
        return (k for k in self.values if k == prefix or k.startswith(dotted))

    def is_default(self, key: str) -> bool:
        """The value is verl's default: the same value, or the same interpolation."""
        return self._default_flags.get(key, False)

    def changed(self, key: str) -> bool:
        """The user set it (an override, or their YAML) to something other than verl's default."""
        return key in self.values and not self.is_default(key)

    def off_switch(self, key: str) -> str | None:
        """The ``...enable`` / ``...enabled`` leaf that is false above ``key``, if any."""
        parts = key.split(".")
        for end in range(1, len(parts)):
            prefix = ".".join(parts[:end])
            for name in ("enable", "enabled"):
                switch = f"{prefix}.{name}"
                if switch != key and self.values.get(switch, None) is False:
                    return switch
        return None

    @cached_property
    def _default_flags(self) -> dict[str, bool]:
        return {k: self._at_default(k) for k in self.values}

    def _at_default(self, key: str) -> bool:
        default = self.defaults.get(key, _NO_DEFAULT)
        if default is _NO_DEFAULT:
            # a table an interpolation made (`mtp: ${oc.select:...model.mtp}`): its leaves
            # follow the interpolation, which is at its default when the leaf above is
            parent = key.rpartition(".")[0]
            while parent:
                if parent in self.raw and parent in self.defaults:
                    return same(self.raw[parent], self.defaults[parent])
                parent = parent.rpartition(".")[0]
            return False
        raw = self.raw.get(key)
        if same(raw, default):
            return True
        if isinstance(default, str) and "${" in default:
            return same(self.values[key], self._evaluate(key, default))
        return same(self.values[key], default)

    def _evaluate(self, key: str, expression: str) -> Any:
        """What the default interpolation gives in this run (verl's default, followed)."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        parent, _, _ = key.rpartition(".")
        node = OmegaConf.select(self.node, parent) if parent else self.node
        if not OmegaConf.is_dict(node):
            return _NO_DEFAULT
        probe = "__rlctl_default__"
        try:
            node[probe] = expression
            value = OmegaConf.to_container(node, resolve=True)[probe]
        except OmegaConfBaseException:
            value = _NO_DEFAULT
        finally:
            node.pop(probe, None)
        return value


def _resolved(cfg: Any, what: str) -> dict[str, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except OmegaConfBaseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise VerlConfigError(f"{what}: an interpolation does not resolve: {first}") from None
    return leaves(data)


def _load(path: Path) -> tuple[Any, str]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        text = read_text(path, "verl config", MAX_YAML_BYTES)
        check_yaml(text, str(path))
    except InputError as exc:
        raise VerlConfigError(str(exc)) from None
    import yaml

    try:
        cfg = OmegaConf.create(text)
    except (OmegaConfBaseException, ValueError, yaml.YAMLError) as exc:  # duplicate keys...
        first = str(exc).strip().splitlines()[0]
        raise VerlConfigError(f"{path}: not a config OmegaConf can load: {first}") from None
    if not OmegaConf.is_dict(cfg) or "actor_rollout_ref" not in cfg:
        raise VerlConfigError(
            f"{path}: no actor_rollout_ref section; give verl's composed trainer config "
            "(e.g. verl/trainer/config/_generated_ppo_trainer.yaml, or `main_ppo --cfg job` output)"
        )
    return cfg, text


def load_verl_config(path: str | Path, overrides: Sequence[Override], *,
                     config_name: str | None = None,
                     verl_version: str | None = None) -> VerlConfig:
    """Load ``path``, choose the base, apply ``overrides`` in order, resolve and compare with
    verl's defaults; raises :class:`VerlConfigError`."""
    from omegaconf import OmegaConf

    path = Path(path)
    cfg, text = _load(path)
    parsed = [(o, _parse(o)) for o in overrides]
    groups, keys = split_groups(parsed)
    raw = leaves(OmegaConf.to_container(cfg, resolve=False))
    try:
        base, baseline, choices = choose_base(
            raw, generated=GENERATED_HEADER in text[:400], config_name=config_name,
            groups=groups, verl_version=verl_version, where=str(path))
    except ValueError as exc:
        raise VerlConfigError(str(exc)) from None
    if base is not None:
        cfg = OmegaConf.create(base)
    _resolved(cfg, str(path))  # the YAML resolves on its own
    touched_prefixes: dict[str, Override] = {}
    hydra_keys: list[Override] = []
    deleted: dict[str, Override] = {}
    for override, parsed_override in keys:
        key = _apply(cfg, override, parsed_override)
        if key is None:
            hydra_keys.append(override)
        elif override.text.startswith("~"):
            deleted[key] = override
        else:
            touched_prefixes[key] = override
    values = _resolved(cfg, f"{path} with the overrides")
    final_raw = leaves(OmegaConf.to_container(cfg, resolve=False))
    touched: dict[str, Override] = {}
    for leaf in values:
        for prefix, override in touched_prefixes.items():
            if leaf == prefix or leaf.startswith(prefix + "."):
                touched[leaf] = override
    return VerlConfig(values=values, raw=final_raw, defaults=baseline.defaults,
                      baseline=baseline, touched=touched, hydra_keys=hydra_keys,
                      groups=choices, deleted=deleted, node=cfg)


def _parse(override: Override) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    where = f"{override.text!r} ({override.origin})"
    try:
        parsed = OverridesParser.create().parse_override(override.text)
    except HydraException as exc:
        first = str(exc).strip().splitlines()[0]
        raise VerlConfigError(f"{where}: not a Hydra override: {first}") from None
    except RecursionError:
        raise VerlConfigError(f"{where}: nested too deeply to be a verl override") from None
    if parsed.is_sweep_override():
        raise VerlConfigError(f"{where}: a multirun sweep is many configs, not one; give one value")
    return parsed


def _apply(cfg: Any, override: Override, parsed: Any) -> str | None:
    """Apply one override like Hydra; returns its key (``None`` for Hydra's own settings)."""
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = f"{override.text!r} ({override.origin})"
    key = parsed.key_or_group
    if key == "hydra" or key.startswith("hydra."):
        return None
    exists = _exists(cfg, key)
    current = OmegaConf.select(cfg, key, throw_on_missing=False) if exists else None
    try:
        if parsed.type == OverrideType.DEL:
            # Hydra: ~key needs a value there; ~key=value needs that value
            expected = parsed.value()
            if current is None:
                raise VerlConfigError(f"{where}: cannot delete {key}: it is not in the config "
                                      "(or is null)")
            if expected is not None and expected != current:
                raise VerlConfigError(f"{where}: cannot delete {key}: its value is {current!r}, "
                                      f"not {expected!r}")
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            del node[leaf]
            return key
        value = parsed.value()
        if parsed.type == OverrideType.CHANGE and not exists:
            raise VerlConfigError(
                f"{where}: {key} is not in the verl config; Hydra refuses to add keys without "
                f"+ (write +{override.text} if the key is meant to be new)")
        # Hydra: +key adds where nothing (or null) is, and merges tables and lists
        if parsed.type == OverrideType.ADD and current is not None \
                and not isinstance(value, dict | list):
            raise VerlConfigError(
                f"{where}: {key} is already in the verl config; Hydra refuses + on an existing "
                f"key (write {override.text.lstrip('+')}, or ++ to set it either way)")
        OmegaConf.update(cfg, key, value, merge=True, force_add=True)
    except OmegaConfBaseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise VerlConfigError(f"{where}: {first}") from None
    return key


def _exists(cfg: Any, key: str) -> bool:
    from omegaconf import OmegaConf

    node: Any = cfg
    for part in key.split("."):
        if not OmegaConf.is_dict(node) or part not in node.keys():  # noqa: SIM118 -- `in` hides ???
            return False
        node = node._get_node(part)  # raw node: no interpolation resolved on the way
    return True
