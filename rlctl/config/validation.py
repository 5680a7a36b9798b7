"""Turn pydantic validation errors into :class:`ConfigProblem` values a person can act on.

Used for the recipe sections and for every plugin option model, so a third-party engine's
options get the same messages (key path, what is wrong, a fix with "did you mean").
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from rlctl.config.problems import ConfigProblem, choose_from, did_you_mean, key_path
from rlctl.config.render import toml_value

Loc = tuple[str | int, ...]

_TYPE_WORDS: dict[Any, str] = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: 'a quoted string ("...")',
}


def _unwrap(tp: Any) -> Any:
    """``X | None`` -> ``X``; ``Annotated[X, ...]`` -> ``X``."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _field_by_key(model: type[BaseModel], key: str) -> tuple[str, Any] | None:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return name, info
    return None


def resolve_loc(model: type[BaseModel], loc: Loc) -> tuple[Any, Any]:
    """Walk ``loc`` through the model's annotations: (type at loc, FieldInfo or None)."""
    tp: Any = model
    info: Any = None
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
            found = _field_by_key(tp, part)
            if found is None:
                return None, None
            info = found[1]
            tp = info.annotation
        elif get_origin(tp) in (list, tuple) and isinstance(part, int):
            args = get_args(tp)
            tp = args[min(part, len(args) - 1)] if get_origin(tp) is tuple and args else (
                args[0] if args else Any)
            info = None
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1] if get_args(tp) else Any
            info = None
        else:
            return None, None
    return _unwrap(tp), info


def keys_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """Valid keys of the table at ``loc`` (aliases where a field has one)."""
    tp, _ = resolve_loc(model, loc)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [info.alias or name for name, info in tp.model_fields.items()]
    return []


def toml_literal(value: Any) -> str:
    """A value as it would be written in a recipe."""
    if isinstance(value, BaseModel):
        return "{...}"
    return toml_value(value)


def _short(value: Any) -> str:
    text = toml_literal(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_words(tp: Any) -> str:
    if tp in _TYPE_WORDS:
        return _TYPE_WORDS[tp]
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "a list [..]"
    if origin is dict or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return "a table"
    name = getattr(tp, "__name__", None)
    if name == "Path":
        return 'a path string ("dir/file")'
    return "a valid value"


def _default_of(info: Any) -> tuple[bool, Any]:
    if info is None:
        return False, None
    if info.default is not PydanticUndefined:
        return True, info.default
    if info.default_factory is not None:
        try:
            return True, info.default_factory()
        except TypeError:  # factories that take validated data
            return False, None
    return False, None


@dataclass(frozen=True)
class _Error:
    """One pydantic error, located in the recipe (what the problem builders read)."""

    model: type[BaseModel]
    raw: Any
    prefix: Loc
    loc: Loc
    path: str
    kind: str
    value: Any
    ctx: dict[str, Any]
    leaf: str
    source: str | None
    tp: Any
    example: str
    what: str


def problem_from_error(
    model: type[BaseModel],
    error: Any,
    *,
    prefix: Loc = (),
    what: str = "keys",
    source_of: Callable[[Loc], str | None] | None = None,
) -> ConfigProblem:
    """One pydantic error dict -> one problem whose path is ``prefix + loc``."""
    loc: Loc = tuple(error["loc"])
    full = prefix + loc
    path = key_path(full)
    leaf = str(loc[-1]) if loc else path
    source = source_of(full) if source_of else None
    tp, info = resolve_loc(model, loc)
    has_default, default = _default_of(info)
    if has_default and default is None:
        example = f"; by default {leaf} is unset (leave the key out)"
    else:
        example = f"; the default is {leaf} = {toml_literal(default)}" if has_default else ""
    e = _Error(model, error, prefix, loc, path, error["type"], error.get("input"),
               error.get("ctx") or {}, leaf, None if source == "default" else source, tp,
               example, what)
    for matches, build in _BUILDERS:
        if matches(e):
            return build(e)
    return _generic(e)


def _unknown_key(e: _Error) -> ConfigProblem:
    parent = key_path(e.prefix + e.loc[:-1]) or "the recipe"
    where = f"[{parent}]" if e.loc[:-1] or e.prefix else "the recipe"
    valid = keys_at(e.model, e.loc[:-1])
    guess = did_you_mean(e.leaf, valid)
    fix = (f'did you mean "{guess}"?' if guess is not None
           else f"remove it; valid {e.what}: {', '.join(sorted(valid)) or 'none'}")
    return ConfigProblem(e.path, f'unknown key "{e.leaf}" in {where}', fix, e.source)


def _moved_key(e: _Error) -> ConfigProblem:
    """A key that moved elsewhere in the recipe (``ctx["to"]``)."""
    to = e.ctx["to"]
    return ConfigProblem(e.path, f"{e.raw['msg']}: [{e.path}] moved to [{to}]",
                         f"move the keys of [{e.path}] to [{to}]", e.source)


def _is_list_length(e: _Error) -> bool:
    return e.kind in ("too_short", "too_long") or (
        e.kind == "missing" and isinstance(e.loc[-1], int))


def _list_length(e: _Error) -> ConfigProblem:
    """A fixed-length list such as betas = [b1, b2]: say how many items, not "key 1"."""
    list_loc = e.loc[:-1] if e.kind == "missing" else e.loc
    list_tp, list_info = resolve_loc(e.model, list_loc)
    items = get_args(list_tp) if get_origin(list_tp) is tuple else ()
    fixed = len(items) if items and Ellipsis not in items else None
    has_list_default, list_default = _default_of(list_info)
    want = f"{fixed} items" if fixed else "the right number of items"
    like = f", like {toml_literal(list_default)}" if has_list_default else ""
    given = f", got {_short(e.value)}" if isinstance(e.value, list | tuple) else ""
    return ConfigProblem(key_path(e.prefix + list_loc), f"expected a list of {want}{given}",
                         f"write {want}{like}", e.source)


def _missing(e: _Error) -> ConfigProblem:
    placeholder = {str: '"..."', int: "1", float: "1.0", bool: "true"}.get(e.tp, "...")
    return ConfigProblem(e.path, f'required key "{e.leaf}" is missing',
                         f"add {e.leaf} = {placeholder} ({_type_words(e.tp)})", e.source)


def _not_a_table(e: _Error) -> ConfigProblem:
    return ConfigProblem(e.path, f"expected a table, got {_short(e.value)}",
                         f"write it as a [{e.path}] table or an inline {{...}} table", e.source)


def _not_allowed(e: _Error) -> ConfigProblem:
    allowed = re.findall(r"'([^']*)'", e.ctx.get("expected", ""))
    return ConfigProblem(e.path, f"{_short(e.value)} is not allowed",
                         choose_from(str(e.value), allowed, what="values"), e.source)


_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
           "less_than_equal": "<="}


def _out_of_range(e: _Error) -> ConfigProblem:
    bound, limit = _BOUNDS[e.kind], next(iter(e.ctx.values()), "?")
    return ConfigProblem(e.path, f"{_short(e.value)} is out of range (must be {bound} {limit})",
                         f"use a value {bound} {limit}{e.example}", e.source)


def _not_finite(e: _Error) -> ConfigProblem:
    return ConfigProblem(e.path, f"{_short(e.value)} is not a finite number",
                         f"use a finite number (nan and inf are not allowed){e.example}",
                         e.source)


def _too_long(e: _Error) -> ConfigProblem:
    most = e.ctx.get("max_length")
    return ConfigProblem(e.path, f"{_short(e.value)} is {len(str(e.value))} characters long, "
                         f"more than {most}", f"use at most {most} characters{e.example}",
                         e.source)


def _pattern(e: _Error) -> ConfigProblem:
    return ConfigProblem(e.path, f"{_short(e.value)} does not match {e.ctx.get('pattern')}",
                         f"use letters, digits, '.', '_' or '-'{e.example}", e.source)


def _with_fix(e: _Error) -> ConfigProblem:
    """A validator that knows the fix says it (PydanticCustomError context)."""
    return ConfigProblem(e.path, f"{e.raw.get('msg', 'invalid value')}, got {_short(e.value)}",
                         str(e.ctx["fix"]), e.source)


def _generic(e: _Error) -> ConfigProblem:
    expected = _type_words(e.tp)
    if e.kind.endswith(("_type", "_parsing")) and expected != "a valid value":
        message = f"expected {expected}, got {_short(e.value)}"
    else:
        msg = str(e.raw.get("msg", "invalid value")).removeprefix("Value error, ")
        message = f"{msg[0].lower() + msg[1:] if msg else msg}, got {_short(e.value)}"
    return ConfigProblem(e.path, message, f"write {expected}{e.example}", e.source)


# In order: the first that matches builds the problem; else _generic.
_BUILDERS: list[tuple[Callable[[_Error], bool], Callable[[_Error], ConfigProblem]]] = [
    (lambda e: e.kind == "extra_forbidden", _unknown_key),
    (lambda e: e.kind == "moved_key", _moved_key),
    (_is_list_length, _list_length),
    (lambda e: e.kind == "missing", _missing),
    (lambda e: e.kind in ("model_type", "dict_type", "model_attributes_type"), _not_a_table),
    (lambda e: e.kind == "literal_error", _not_allowed),
    (lambda e: e.kind in _BOUNDS, _out_of_range),
    (lambda e: e.kind == "finite_number", _not_finite),
    (lambda e: e.kind == "string_too_long", _too_long),
    (lambda e: e.kind == "string_pattern_mismatch", _pattern),
    (lambda e: "fix" in e.ctx, _with_fix),
]


def problems_from_validation(
    model: type[BaseModel],
    exc: ValidationError,
    *,
    prefix: Loc = (),
    what: str = "keys",
    source_of: Callable[[Loc], str | None] | None = None,
) -> list[ConfigProblem]:
    return [
        problem_from_error(model, e, prefix=prefix, what=what, source_of=source_of)
        for e in exc.errors()
    ]


def prune(data: dict[str, Any], loc: Sequence[str | int]) -> None:
    """Delete the deepest existing entry on ``loc`` so the rest can validate with defaults.

    A missing required key removes its parent (e.g. a ``[[rewards]]`` entry without
    ``name``); any other error removes the offending key.
    """
    node: Any = data
    trail: list[tuple[Any, Any]] = []
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            trail.append((node, part))
            node = node[part]
        else:
            break
    if trail:
        container, part = trail[-1]
        if isinstance(container, list) and not isinstance(container[part], dict) and len(trail) > 1:
            # a bad item of a value list (betas = [1.0, 0.5]): dropping it alone would shift the
            # others and make up a second problem ("betas[1] is missing"); drop the whole list
            container, part = trail[-2]
        del container[part]


def to_aliases(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """Spell every known key the way TOML does (``apply_in`` -> ``in``), recursively.

    Applied to each source before merging, so ``in`` in one file and ``apply_in`` in
    another are the same key: the later one wins, and provenance follows it.
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        found = _field_by_key(model, key)
        if found is None:
            out[key] = value
            continue
        name, info = found
        tp = _unwrap(info.annotation)
        item = _unwrap(get_args(tp)[0]) if get_origin(tp) is list and get_args(tp) else None
        if isinstance(value, dict) and isinstance(tp, type) and issubclass(tp, BaseModel):
            value = to_aliases(value, tp)
        elif isinstance(item, type) and issubclass(item, BaseModel):
            if isinstance(value, list):
                value = [to_aliases(v, item) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict):  # {"0": {...}}: list elements addressed by index
                value = {k: to_aliases(v, item) if isinstance(v, dict) else v
                         for k, v in value.items()}
        out[info.alias or name] = value
    return out
