"""Where recipe values come from: recipe files, ``RLCTL_*`` environment variables, ``-s`` overrides.

Each source becomes a :class:`Layer`: a nested dict plus the label shown by
``rlctl config show --sources``. Values from the environment and ``-s`` are parsed as TOML
literals (``8``, ``1e-6``, ``true``, ``[1, 2]``, ``{a = 1}``, ``"text"``); a bare word that is
not valid TOML (``loss``, ``Qwen/Qwen3-0.6B``) is taken as a string.

We read these sources ourselves rather than through pydantic-settings because the behaviour
rlctl needs differs from its defaults on every point that matters here: a missing recipe file
must be an error (pydantic-settings skips it), several files must deep-merge, a misspelt
top-level name in ``RLCTL_ALGORTHM__LR`` must be reported (pydantic-settings drops it), values
must be typed like TOML, and every value must remember its source.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlctl.config.problems import ConfigProblem

ENV_PREFIX = "RLCTL_"
ENV_DELIMITER = "__"
REPLACE_KEY = "_replace"
"""``_replace = true`` in a table: it replaces the table the layers below set, instead of
merging into it (rlctl.config.merge). No option can be named so: pydantic fields never
start with an underscore."""
UNSET_PREFIX = "~"
"""``-s ~key.path`` removes the key (Hydra's spelling, which verl users know)."""

Key = tuple[str, ...]


@dataclass
class Layer:
    """One source's contribution: a nested dict and where it came from."""

    label: str
    """Shown by ``config show --sources``: a file path, ``env RLCTL_X__Y`` or ``-s x.y=v``."""
    data: dict[str, Any]
    """Nested tables as TOML would produce them."""
    raw_strings: dict[Key, str] = field(default_factory=dict)
    """Key -> original text for values parsed from a literal, so a string field given
    ``123`` on the command line can take the text ``"123"`` instead of failing."""
    unset: list[Key] = field(default_factory=list)
    """Keys this layer removes from the layers below it (``-s ~key.path``), so that the
    default applies again."""


# --------------------------------------------------------------------------- files

# A recipe describes one run in tens of keys (the largest shipped one has under 100); bulk
# data (prompts, tables) belongs in data files. The caps refuse a hostile or generated file
# in well under a second instead of spending minutes parsing and validating it.
# (docs/config.md states both numbers: rlctl/config/reference.py's INTRO.)
MAX_RECIPE_BYTES = 1024 * 1024
MAX_RECIPE_KEYS = 10_000

_LINE_COL = re.compile(r"\(at line (\d+), column (\d+)\)")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


def read_recipe_file(path: str | Path) -> tuple[Layer | None, list[ConfigProblem]]:
    """Parse one recipe file; a missing file or a syntax error is a problem, never skipped."""
    p = Path(path)
    label = str(path)
    if not p.exists():
        return None, [
            ConfigProblem(
                "",
                "recipe file not found",
                f"check the path (working directory: {Path.cwd()})",
                source=label,
            )
        ]
    if not p.is_file():
        return None, [ConfigProblem("", "not a file", "give the path of a .toml recipe", label)]
    size = p.stat().st_size
    if size > MAX_RECIPE_BYTES:
        return None, [_too_big(f"is {size:,} bytes", f"{MAX_RECIPE_BYTES:,} bytes", label)]
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [
            ConfigProblem("", f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                          "save the recipe as UTF-8", label)
        ]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, [_syntax_problem(exc, text, label)]
    keys = count_keys(data, MAX_RECIPE_KEYS + 1)
    if keys > MAX_RECIPE_KEYS:
        return None, [_too_big(f"has more than {MAX_RECIPE_KEYS:,} keys",
                               f"{MAX_RECIPE_KEYS:,} keys", label)]
    return Layer(label, data), []


def _too_big(what: str, limit: str, label: str) -> ConfigProblem:
    return ConfigProblem(
        "", f"the recipe file {what}; rlctl reads recipes of at most {limit}",
        "a recipe describes one run in tens of keys: put bulk data (prompts, tables) in a "
        "data file (data.train) and keep the recipe small", source=label)


def count_keys(data: Any, stop_at: int) -> int:
    """Tables and values in ``data`` (list elements count), counting no further than ``stop_at``."""
    count, stack = 0, [data]
    while stack:
        node = stack.pop()
        children = node.values() if isinstance(node, dict) else (
            node if isinstance(node, list) else ())
        for child in children:
            count += 1
            if count >= stop_at:
                return count
            stack.append(child)
    return count


def _syntax_problem(exc: tomllib.TOMLDecodeError, text: str, label: str) -> ConfigProblem:
    """File, line and column of a TOML syntax error, plus the key path it is in if we can tell."""
    msg = str(exc)
    m = _LINE_COL.search(msg)
    line = int(m.group(1)) if m else 0
    col = int(m.group(2)) if m else 0
    reason = _LINE_COL.sub("", msg).strip()
    where = f"{label}:{line}:{col}" if m else label
    path = _guess_key_path(text.splitlines(), line) if m else ""
    return ConfigProblem(
        path,
        f"TOML syntax error: {reason} (line {line}, column {col})",
        "fix the TOML at that line (strings need quotes, one key = value per line, "
        "tables as [section])",
        source=where,
    )


def _guess_key_path(lines: list[str], line_no: int) -> str:
    """Best-effort key path of line ``line_no`` (1-based): its table header plus its key."""
    table = ""
    arrays: dict[str, int] = {}
    for raw in lines[: max(line_no - 1, 0)]:
        h = _HEADER.match(raw)
        if h:
            name = h.group(2).replace(" ", "")
            if h.group(1) == "[[":
                arrays[name] = arrays.get(name, -1) + 1
                table = f"{name}[{arrays[name]}]"
            else:
                table = name
    key = ""
    if 0 < line_no <= len(lines):
        k = _KEY.match(lines[line_no - 1])
        if k and not _HEADER.match(lines[line_no - 1]):
            key = k.group(1).strip().replace('"', "").replace("'", "")
    return ".".join(p for p in (table, key) if p)


# --------------------------------------------------------------------------- literals


def parse_assignment(key: str, value: str) -> tuple[dict[str, Any], Key, bool]:
    """Parse ``key = value`` as TOML; returns (nested dict, key path, was_literal).

    A value that is not valid TOML becomes a string. Raises ``ValueError`` when the key
    itself is not a valid TOML key path.
    """
    value = value.strip()
    try:
        skeleton = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        raise ValueError(f"{key!r} is not a valid key path") from None
    path: list[str] = []
    node: Any = skeleton
    while isinstance(node, dict):
        ((k, node),) = node.items()
        path.append(k)
    try:
        data = tomllib.loads(f"{key} = {value}")
        literal = _single_path(data, path)  # "1\nother = 2" must not smuggle in a second key
    except tomllib.TOMLDecodeError:
        literal = False
    if not literal:
        data = tomllib.loads(f"{key} = {json.dumps(value)}")
    return data, tuple(path), literal


def _single_path(data: dict[str, Any], path: list[str]) -> bool:
    node: Any = data
    for part in path:
        if not isinstance(node, dict) or list(node) != [part]:
            return False
        node = node[part]
    return True


def parse_override(text: str) -> tuple[Layer | None, list[ConfigProblem]]:
    """``-s algorithm.kl.coef=0.01`` -> a layer (highest precedence); ``-s ~key.path``
    unsets the key."""
    label = f"-s {text}"
    if text.strip().startswith(UNSET_PREFIX):
        return _parse_unset(text.strip(), label)
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        return None, [
            ConfigProblem(
                "",
                f"override {text!r} is not KEY=VALUE",
                "write -s section.key=value, e.g. -s algorithm.group_size=4",
                source="-s",
            )
        ]
    try:
        data, path, literal = parse_assignment(key, value)
    except ValueError as exc:
        return None, [
            ConfigProblem("", f"override {text!r}: {exc}",
                          "write dotted keys such as algorithm.kl.coef=0.01", source="-s")
        ]
    raw = {path: value.strip()} if literal else {}
    return Layer(label, data, raw), []


def _parse_unset(text: str, label: str) -> tuple[Layer | None, list[ConfigProblem]]:
    """``~key.path`` -> a layer that removes that key."""
    key = text[len(UNSET_PREFIX):].strip()
    if "=" in key or not key:
        return None, [ConfigProblem(
            "", f"override {text!r}: ~ unsets a key and takes no value",
            "write -s ~section.key to unset it (its default applies), or -s section.key=value "
            "to set it", source="-s")]
    try:
        _, path, _ = parse_assignment(key, "0")
    except ValueError as exc:
        return None, [ConfigProblem("", f"override {text!r}: {exc}",
                                    "write dotted keys such as -s ~algorithm.kl.coef",
                                    source="-s")]
    return Layer(label, {}, unset=[path]), []


def env_layers(env: Mapping[str, str]) -> tuple[list[Layer], list[ConfigProblem]]:
    """``RLCTL_ALGORITHM__KL__COEF=0.01`` -> one layer per variable (sorted by name).

    A variable counts as a recipe key when it nests (contains ``__``) or names a top-level
    section; other ``RLCTL_*`` variables (``RLCTL_PLUGINS``...) are settings of rlctl itself.
    """
    from rlctl.config.recipe import Recipe

    layers: list[Layer] = []
    problems: list[ConfigProblem] = []
    sections = set(Recipe.model_fields)
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX):].lower().split(ENV_DELIMITER)
        if len(parts) == 1 and parts[0] not in sections:
            continue
        label = f"env {name}"
        if any(not p for p in parts):
            problems.append(
                ConfigProblem("", f"environment variable {name} has an empty key part",
                              "separate nested keys with exactly two underscores", label)
            )
            continue
        key = ".".join(json.dumps(p) if not re.fullmatch(r"[a-z0-9_-]+", p) else p for p in parts)
        try:
            data, path, literal = parse_assignment(key, env[name])
        except ValueError as exc:
            problems.append(ConfigProblem("", f"{name}: {exc}", "", label))
            continue
        layers.append(Layer(label, data, {path: env[name].strip()} if literal else {}))
    return layers, problems


def file_layers(paths: Iterable[str | Path]) -> tuple[list[Layer], list[ConfigProblem]]:
    """Read every recipe file, reporting all missing or broken files together."""
    layers: list[Layer] = []
    problems: list[ConfigProblem] = []
    for path in paths:
        layer, probs = read_recipe_file(path)
        problems += probs
        if layer is not None:
            layers.append(layer)
    return layers, problems
