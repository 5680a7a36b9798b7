"""JSON Schema of the recipe, including the option model of every installed plugin.

The schema is what TOML editors (Taplo / "Even Better TOML", tombi) use for completion and
checking. Each ``options`` table is tied to the name that selects it with ``if``/``then``:
``[engines.train] backend = "fsdp"`` makes ``[engines.train.options]`` follow fsdp's option
model. Name fields get an ``enum`` of the registered names.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from rlctl.config.recipe import LoggingSection, Recipe
from rlctl.hookspecs import PLUGIN_KINDS
from rlctl.registry import Registry

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
REF = "#/$defs/{model}"


@dataclass(frozen=True)
class _Slot:
    """Where a registry kind is selected in the recipe."""

    kind: str
    section: type[BaseModel]
    name_field: str
    options_field: str | None


def _section_class(parts: list[str]) -> type[BaseModel]:
    """The recipe section class at key path ``parts`` (``rewards[]``: the entries' class)."""
    cls: type[BaseModel] = Recipe
    for part in parts:
        annotation = cls.model_fields[part.removesuffix("[]")].annotation
        cls = next(a for a in (annotation, *get_args(annotation))
                   if inspect.isclass(a) and issubclass(a, BaseModel))
    return cls


def _slots() -> list[_Slot]:
    """Each kind selected by one name field of a section (a list of names, like the sinks,
    is tied by :func:`_tie_sinks`)."""
    out = []
    for kind in PLUGIN_KINDS.values():
        *section, name_field = kind.select.split(".")
        if name_field.endswith("[]"):
            continue
        options = kind.options.split(".") if kind.options else []
        options_field = options[-1] if options[:-1] == section else None
        out.append(_Slot(kind.name, _section_class(section), name_field, options_field))
    return out


def _option_models(registry: Registry) -> list[type[BaseModel]]:
    """Option models that pydantic can express as JSON Schema (others stay permissive)."""
    out: list[type[BaseModel]] = []
    for kind in registry.kinds():
        for reg in registry.all(kind):
            model = reg.options
            if model is None or model in out:
                continue
            try:
                model.model_json_schema(by_alias=True)
            except Exception:  # noqa: BLE001, S112 -- an exotic field type must not break the schema
                continue
            out.append(model)
    return out


def build_schema(registry: Registry) -> dict[str, Any]:
    """The recipe's JSON Schema with every registered option model of ``registry``."""
    models = _option_models(registry)
    key_map, top = models_json_schema(
        [(Recipe, "validation")] + [(m, "validation") for m in models],
        ref_template=REF,
        by_alias=True,
    )
    defs: dict[str, Any] = top["$defs"]
    ref_of = {m: key_map[(m, "validation")]["$ref"] for m in models}
    # section class names are unique within the recipe, so they name their own $defs entry
    slots = _slots()
    sections = {s.section for s in slots} | {LoggingSection}
    section_def = {cls: defs[cls.__name__] for cls in sections}
    for slot in slots:
        _tie_options(section_def[slot.section], slot, registry, ref_of)
    _tie_sinks(section_def[LoggingSection], registry, ref_of)
    recipe = defs.pop("Recipe")
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://rlctl.dev/schema/recipe.json",
        **recipe,
        "title": "rlctl recipe",
        "$defs": defs,
    }


def _options_schema(reg: Any, ref_of: dict[type[BaseModel], str]) -> dict[str, Any]:
    if reg.options is None:
        return {"type": "object", "maxProperties": 0,
                "description": f"{reg.name} takes no options."}
    if reg.options in ref_of:
        return {"$ref": ref_of[reg.options]}
    return {"type": "object", "description": f"Options of {reg.name} (not expressible here)."}


def _tie_options(
    section: dict[str, Any], slot: _Slot, registry: Registry, ref_of: dict[type[BaseModel], str]
) -> None:
    props = section["properties"]
    names = registry.names(slot.kind)
    name_prop = props[slot.name_field]
    target = next((b for b in name_prop.get("anyOf", []) if b.get("type") == "string"),
                  name_prop)
    if names:
        target["enum"] = names
    if slot.options_field is None:
        return
    default = slot.section.model_fields[slot.name_field].default
    rules: list[dict[str, Any]] = []
    for reg in registry.all(slot.kind):
        then = {"properties": {slot.options_field: _options_schema(reg, ref_of)}}
        rules.append({
            "if": {"properties": {slot.name_field: {"const": reg.name}},
                   "required": [slot.name_field]},
            "then": then,
        })
        if reg.name == default:  # the name applies when the key is left out too
            rules.append({"if": {"not": {"required": [slot.name_field]}}, "then": then})
    if rules:
        section["allOf"] = rules


def _tie_sinks(
    section: dict[str, Any], registry: Registry, ref_of: dict[type[BaseModel], str]
) -> None:
    names = registry.names("metric_sink")
    if not names:
        return
    section["properties"]["sinks"]["items"] = {"type": "string", "enum": names}
    section["properties"]["sink_options"] = {
        **{k: v for k, v in section["properties"]["sink_options"].items()
           if k not in ("additionalProperties",)},
        "properties": {r.name: _options_schema(r, ref_of) for r in registry.all("metric_sink")},
        "additionalProperties": False,
    }
