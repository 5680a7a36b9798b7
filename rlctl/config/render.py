"""Write a resolved recipe back as TOML, optionally with a ``# source`` comment on each value.

A small emitter of our own (rather than tomli-w) because ``config show --sources`` puts a
comment after every value, and comments are outside what TOML writers offer. The output is
itself a valid recipe: ``rlctl config show x.toml > y.toml`` gives a recipe equal to ``x``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_COMMENT_COLUMN = 40

SourceOf = Callable[[tuple[str | int, ...]], str] | None


def toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """One value as TOML text (inline form for tables and lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()
                          if v is not None)
        return "{" + (f" {inner} " if inner else "") + "}"
    return json.dumps(str(value), ensure_ascii=False)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value) > 0


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(isinstance(v, Mapping) for v in value)


def render_toml(data: Mapping[str, Any], source_of: SourceOf = None) -> str:
    """TOML text of ``data``; ``source_of(loc)`` adds a comment with each value's source."""
    lines: list[str] = []
    _emit_table(lines, data, (), source_of, header=None)
    return "\n".join(lines).strip() + "\n"


def _line(text: str, loc: tuple[str | int, ...], source_of: SourceOf) -> str:
    if source_of is None:
        return text
    return f"{text.ljust(_COMMENT_COLUMN - 1)} # {source_of(loc)}"


def _emit_table(
    lines: list[str],
    table: Mapping[str, Any],
    loc: tuple[str | int, ...],
    source_of: SourceOf,
    header: str | None,
) -> None:
    plain = [k for k, v in table.items() if not (_is_table(v) or _is_table_array(v))]
    # a table holding only sub-tables needs no header of its own (TOML creates it implicitly)
    if header is not None and (plain or header.startswith("[[")):
        if lines:
            lines.append("")
        lines.append(header)
    # plain keys first: TOML puts every key of a table before its sub-tables
    for key, value in table.items():
        if _is_table(value) or _is_table_array(value):
            continue
        if value is None:
            if source_of is not None:
                lines.append(_line(f"# {toml_key(key)} is unset", loc + (key,), source_of))
            continue
        lines.append(_line(f"{toml_key(key)} = {toml_value(value)}", loc + (key,), source_of))
    for key, value in table.items():
        name = ".".join(toml_key(str(p)) for p in loc if isinstance(p, str))
        name = f"{name}.{toml_key(key)}" if name else toml_key(key)
        if _is_table(value):
            _emit_table(lines, value, loc + (key,), source_of, f"[{name}]")
        elif _is_table_array(value):
            for i, item in enumerate(value):
                _emit_table(lines, item, loc + (key, i), source_of, f"[[{name}]]")
