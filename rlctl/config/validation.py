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
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    leaf = str(loc[-1]) if loc else path
    source = source_of(full) if source_of else None
    if source == "default":
        source = None
    tp, info = resolve_loc(model, loc)
    has_default, default = _default_of(info)
    if has_default and default is None:
        example = f"; by default {leaf} is unset (leave the key out)"
    else:
        example = f"; the default is {leaf} = {toml_literal(default)}" if has_default else ""

    if kind == "extra_forbidden":
        parent = key_path(prefix + loc[:-1]) or "the recipe"
        where = f"[{parent}]" if loc[:-1] or prefix else "the recipe"
        valid = keys_at(model, loc[:-1])
        guess = did_you_mean(leaf, valid)
        fix = (f'did you mean "{guess}"?' if guess is not None
               else f"remove it; valid {what}: {', '.join(sorted(valid)) or 'none'}")
        return ConfigProblem(path, f'unknown key "{leaf}" in {where}', fix, source)
    if kind == "moved_key":  # a key that moved elsewhere in the recipe (ctx["to"])
        return ConfigProblem(path, f"{error['msg']}: [{path}] moved to [{ctx['to']}]",
                             f"move the keys of [{path}] to [{ctx['to']}]", source)
    if kind in ("too_short", "too_long") or (kind == "missing" and isinstance(loc[-1], int)):
        # a fixed-length list such as betas = [b1, b2]: say how many items, not "key 1"
        list_loc = loc[:-1] if kind == "missing" else loc
        list_tp, list_info = resolve_loc(model, list_loc)
        items = get_args(list_tp) if get_origin(list_tp) is tuple else ()
        fixed = len(items) if items and Ellipsis not in items else None
        has_list_default, list_default = _default_of(list_info)
        want = f"{fixed} items" if fixed else "the right number of items"
        like = f", like {toml_literal(list_default)}" if has_list_default else ""
        given = f", got {_short(value)}" if isinstance(value, list | tuple) else ""
        return ConfigProblem(key_path(prefix + list_loc), f"expected a list of {want}{given}",
                             f"write {want}{like}", source)
    if kind == "missing":
        placeholder = {str: '"..."', int: "1", float: "1.0", bool: "true"}.get(tp, "...")
        return ConfigProblem(path, f'required key "{leaf}" is missing',
                             f"add {leaf} = {placeholder} ({_type_words(tp)})", source)
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return ConfigProblem(path, f"expected a table, got {_short(value)}",
                             f"write it as a [{path}] table or an inline {{...}} table", source)
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", ctx.get("expected", ""))
        return ConfigProblem(path, f"{_short(value)} is not allowed",
                             choose_from(str(value), allowed, what="values"), source)
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
                 "less_than_equal": "<="}[kind]
        limit = next(iter(ctx.values()), "?")
        return ConfigProblem(path, f"{_short(value)} is out of range (must be {bound} {limit})",
                             f"use a value {bound} {limit}{example}", source)
    if kind == "finite_number":
        return ConfigProblem(path, f"{_short(value)} is not a finite number",
                             f"use a finite number (nan and inf are not allowed){example}",
                             source)
    if kind == "string_too_long":
        return ConfigProblem(
            path, f"{_short(value)} is {len(str(value))} characters long, more than "
            f"{ctx.get('max_length')}", f"use at most {ctx.get('max_length')} characters{example}",
            source)
    if kind == "string_pattern_mismatch":
        return ConfigProblem(path, f"{_short(value)} does not match {ctx.get('pattern')}",
                             f"use letters, digits, '.', '_' or '-'{example}", source)
    if "fix" in ctx:  # a validator that knows the fix says it (PydanticCustomError context)
        return ConfigProblem(path, f"{error.get('msg', 'invalid value')}, got {_short(value)}",
                             str(ctx["fix"]), source)
    expected = _type_words(tp)
    if kind.endswith(("_type", "_parsing")) and expected != "a valid value":
        message = f"expected {expected}, got {_short(value)}"
    else:
        msg = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        message = f"{msg[0].lower() + msg[1:] if msg else msg}, got {_short(value)}"
    return ConfigProblem(path, message, f"write {expected}{example}", source)


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
