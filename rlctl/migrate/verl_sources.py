"""Which verl config a run starts from, and which of verl's defaults it is compared with.

verl composes its config with Hydra: ``--config-name`` picks the primary config and config-group
choices (``model_engine=megatron``) pick its parts; verl publishes the result for FSDP and for
Megatron as ``_generated_ppo_trainer.yaml`` / ``_generated_ppo_megatron_trainer.yaml``. rlctl
ships those per release (:mod:`verl_release`), so a script that chooses Megatron on top of the
FSDP file given starts from that release's Megatron config, exactly as verl would compose it.

The *baseline* (verl's defaults, to tell the user's settings from verl's) is, in order: the
release ``--verl-version`` names; the release whose generated config the YAML is; the YAML
itself when it is verl's generated file of a commit rlctl has no data for (its header says so);
otherwise the closest release, where every leaf of the YAML that differs is the user's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlctl.migrate.verl_release import (
    Match,
    Release,
    Variant,
    by_name,
    compare,
    detect,
    names,
    releases,
)

ENGINES = {"dp": "fsdp", "megatron": "megatron"}
"""verl's ``model_engine`` choices rlctl has an engine for."""
CONFIG_NAMES = {"ppo_trainer": "fsdp", "ppo_megatron_trainer": "megatron"}


@dataclass(frozen=True)
class Baseline:
    """verl's defaults a run is compared with."""

    release: Release | None
    """None: the YAML itself (verl's generated file of a commit rlctl has no data for)."""
    variant: Variant
    defaults: dict[str, Any]
    """Leaf -> verl's default (unresolved)."""
    how: str
    """One line for the report: which defaults, and why."""


@dataclass(frozen=True)
class GroupChoice:
    """A Hydra config-group choice (``model_engine=megatron``) and what it did here."""

    text: str
    origin: str
    note: str


def group_names() -> set[str]:
    """verl's config groups (``model_engine``, ``actor``...) over every shipped release."""
    return {g.split("@")[0] for r in releases() for g in r.groups}


def split_groups(parsed: list[tuple[Any, Any]]) -> tuple[list[tuple[Any, Any]],
                                                         list[tuple[Any, Any]]]:
    """(group choices, key overrides) of parsed Hydra overrides, each in order."""
    known = group_names()
    groups, keys = [], []
    for override, p in parsed:
        name = p.key_or_group
        is_group = p.package is not None or ("." not in name and name in known)
        (groups if is_group else keys).append((override, p))
    return groups, keys


def _group_key(p: Any) -> str:
    return p.key_or_group + (f"@{p.package}" if p.package else "")


def _wanted(config_name: str | None, groups: list[tuple[Any, Any]]) -> tuple[Variant | None, str]:
    """The variant the script composes (``--config-name``, then ``model_engine``), and why."""
    from hydra.core.override_parser.types import OverrideType

    wanted: Variant | None = None
    cause = ""
    if config_name:
        name = config_name.removesuffix(".yaml")
        wanted = CONFIG_NAMES.get(name)  # type: ignore[assignment]
        cause = f"--config-name {name}"
    for override, p in groups:
        where = f"{override.text!r} ({override.origin})"
        if p.type != OverrideType.CHANGE:
            raise ValueError(f"{where}: adding or deleting a config group changes which files "
                             "verl composes; rlctl composes from verl's generated configs only")
        if p.key_or_group == "model_engine" and p.package is None:
            engine = str(p.value())
            if engine not in ENGINES:
                raise ValueError(f"{where}: verl's {engine} engine; rlctl trains with fsdp (dp) "
                                 "or megatron")
            wanted, cause = ENGINES[engine], override.text  # type: ignore[assignment]
    return wanted, cause


def _release(verl_version: str | None) -> Release | None:
    if verl_version is None:
        return None
    try:
        return by_name(verl_version)
    except KeyError:
        raise ValueError(f"--verl-version {verl_version}: rlctl has verl's defaults for "
                         f"{', '.join(names())}") from None


def choose_base(raw: dict[str, Any], *, generated: bool, config_name: str | None,
                groups: list[tuple[Any, Any]], verl_version: str | None,
                where: str) -> tuple[dict[str, Any] | None, Baseline, list[GroupChoice]]:
    """(a config to start from instead of the YAML, or None; the baseline; the group choices)."""
    wanted, cause = _wanted(config_name, groups)
    match = detect(raw)
    strategy = raw.get("actor_rollout_ref.actor.strategy")
    own: Variant = "megatron" if strategy == "megatron" else "fsdp"
    variant: Variant = wanted or own
    chosen = _release(verl_version)
    release = chosen or match.release
    base = None
    if config_name and wanted is None and match.exact:
        raise ValueError(f"--config-name {config_name}: the script composes its own config, but "
                         f"{where} is verl's plain generated config; give the config verl "
                         f"composes for it (`python3 -m verl.trainer.main_ppo --config-name "
                         f"{config_name} --cfg job` output)")
    if wanted is not None and wanted != own:
        if not match.exact:
            file = "_generated_ppo_megatron_trainer.yaml" if wanted == "megatron" \
                else "_generated_ppo_trainer.yaml"
            raise ValueError(f"{cause}: the script composes verl's {wanted} config, but {where} "
                             f"is a {own} config; give verl's {file}")
        base = release.config(wanted)
        baseline = Baseline(release, wanted, release.leaves(wanted),
                            f"{cause}: verl {release.label}'s generated {wanted} config "
                            "(shipped with rlctl), as verl composes it")
    else:
        baseline = _baseline(raw, match, chosen, variant, generated)
    choices = _choices(groups, baseline.release or match.release, variant, cause)
    return base, baseline, choices


def _baseline(raw: dict[str, Any], match: Match, chosen: Release | None, variant: Variant,
              generated: bool) -> Baseline:
    label = match.release.label
    if chosen is not None:
        n = compare(raw, chosen, variant).differing
        return Baseline(chosen, variant, chosen.leaves(variant),
                        f"--verl-version {chosen.label}: verl {chosen.label}'s {variant} "
                        f"defaults ({n} leaves of the YAML differ from them)")
    if match.exact and match.variant == variant:
        return Baseline(match.release, variant, match.release.leaves(variant),
                        f"the YAML is verl {label}'s generated {variant} config")
    if generated:
        return Baseline(None, variant, dict(raw),
                        f"the YAML is verl's generated {variant} config from a commit rlctl has "
                        f"no defaults for (closest: {label}, {match.differing} leaves differ); "
                        "its values are taken as verl's defaults")
    return Baseline(match.release, variant, match.release.leaves(variant),
                    f"closest verl release: {label} ({match.differing} leaves of the YAML "
                    "differ from its defaults and count as your settings; --verl-version "
                    "chooses another)")


def _choices(groups: list[tuple[Any, Any]], release: Release, variant: Variant,
             cause: str) -> list[GroupChoice]:
    out = []
    for override, p in groups:
        key = _group_key(p)
        where = f"{override.text!r} ({override.origin})"
        if override.text == cause:
            out.append(GroupChoice(override.text, override.origin,
                                   f"config-group choice: verl's {variant} config"))
            continue
        options = release.groups.get(key)
        if options is None:
            raise ValueError(f"{where}: not a config group of verl {release.label} "
                             f"({', '.join(sorted(release.groups))})")
        if str(p.value()) != options[variant]:
            raise ValueError(f"{where}: a config-group choice other than verl's "
                             f"({key}={options[variant]}); rlctl composes from verl's generated "
                             "configs and cannot apply it: give the config verl composes "
                             "(`python3 -m verl.trainer.main_ppo ... --cfg job` output)")
        out.append(GroupChoice(override.text, override.origin,
                               "config-group choice at verl's default"))
    return out
