"""Deep merge of source layers, remembering which layer set each value.

Tables merge key by key; any other value (scalar, list) replaces what was there. A table of
numeric keys merged onto a list addresses its elements, so ``-s rewards.0.weight=2`` and
``RLCTL_REWARDS__0__WEIGHT=2`` change one element of ``[[rewards]]``.

Two ways to take away what a lower layer set: a table holding ``_replace = true`` replaces
the table below instead of merging into it (an overlay that swaps an environment must not
inherit the old one's options), and ``-s ~key.path`` removes a key, so that its default
applies again.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlctl.config.problems import ConfigProblem, key_path
from rlctl.config.sources import REPLACE_KEY, Key, Layer

DEFAULT_SOURCE = "default"


@dataclass
class Merged:
    """The merged raw data and, for every key a layer set, that layer's label."""

    data: dict[str, Any] = field(default_factory=dict)
    provenance: dict[Key, str] = field(default_factory=dict)
    raw_strings: dict[Key, str] = field(default_factory=dict)

    def source_of(self, loc: Sequence[str | int]) -> str:
        """Label of the layer that set ``loc`` or the nearest table above it; else default."""
        key = tuple(str(p) for p in loc)
        for n in range(len(key), 0, -1):
            label = self.provenance.get(key[:n])
            if label is not None:
                return label
        return DEFAULT_SOURCE


def merge_layers(layers: Iterable[Layer]) -> tuple[Merged, list[ConfigProblem]]:
    """Merge ``layers`` from lowest to highest precedence."""
    merged = Merged()
    problems: list[ConfigProblem] = []
    for layer in layers:
        _merge_into(merged.data, layer.data, (), layer.label, merged, problems)
        merged.raw_strings.update(layer.raw_strings)
        for key in layer.unset:
            _unset(merged, key, layer.label, problems)
    return merged, problems


def _unset(merged: Merged, key: Key, label: str, problems: list[ConfigProblem]) -> None:
    """Remove ``key`` (a list element by its index) from the merged data."""
    node: Any = merged.data
    for part in key[:-1]:
        node = _child(node, part)
        if node is None:
            break
    last = key[-1]
    if isinstance(node, dict) and last in node:
        old = node.pop(last)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        old = node.pop(int(last))
        # the later elements moved down one place: their provenance no longer lines up
        for sub in _sub_keys(node, key[:-1]):
            merged.provenance.pop(sub, None)
    else:
        problems.append(ConfigProblem(
            key_path(key), "nothing to unset: no recipe file, environment variable or earlier "
            "-s sets this key", "check the key path (`rlctl config show --sources` lists what "
            "is set and by whom), or drop the ~ override", source=label))
        return
    _forget_below(merged, key, old)
    merged.provenance.pop(key, None)


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None


def _replacing(value: dict[str, Any], key: Key, label: str,
               problems: list[ConfigProblem]) -> tuple[bool, dict[str, Any]]:
    """Whether table ``value`` replaces the one below (``_replace = true``), and the table
    without the marker."""
    if REPLACE_KEY not in value:
        return False, value
    marker = value[REPLACE_KEY]
    rest = {k: v for k, v in value.items() if k != REPLACE_KEY}
    if not isinstance(marker, bool):
        problems.append(ConfigProblem(
            key_path(key + (REPLACE_KEY,)), f"must be true or false, got {marker!r}",
            f"write {REPLACE_KEY} = true to replace the table the recipes below set",
            source=label))
        return False, rest
    return marker, rest


def _forget_below(merged: Merged, key: Key, old: Any) -> None:
    """A value replaced wholesale no longer owes anything to older layers' sub-keys.

    Only the keys inside ``old`` (the value being replaced) can have entries, so walking it
    costs what the old value holds, which leaves the recipe here: merging stays linear in the
    number of keys. (Scanning every recorded key instead made a 10k-key recipe take 10 s.)
    """
    merged.raw_strings.pop(key, None)
    for sub in _sub_keys(old, key):
        merged.provenance.pop(sub, None)
        merged.raw_strings.pop(sub, None)


def _sub_keys(value: Any, key: Key) -> Iterator[Key]:
    """Every key path strictly inside ``value`` (list elements by their index as text)."""
    stack = [(value, key)]
    while stack:
        node, prefix = stack.pop()
        items = node.items() if isinstance(node, dict) else (
            ((str(i), v) for i, v in enumerate(node)) if isinstance(node, list) else ())
        for k, v in items:
            sub = prefix + (str(k),)
            yield sub
            stack.append((v, sub))


def _merge_into(
    base: dict[str, Any] | list[Any],
    layer: dict[str, Any],
    prefix: Key,
    label: str,
    merged: Merged,
    problems: list[ConfigProblem],
) -> None:
    for k, v in layer.items():
        key = prefix + (k,)
        if isinstance(base, list):
            # numeric keys address list elements (see module docstring)
            if not k.isdigit() or int(k) >= len(base):
                problems.append(
                    ConfigProblem(
                        key_path(prefix) + f"[{k}]",
                        f"no element {k} in a list of {len(base)}",
                        f"use an index from 0 to {len(base) - 1}" if base else
                        "define the list in a recipe file first",
                        source=label,
                    )
                )
                continue
            slot: Any = int(k)
            current = base[slot]
        else:
            slot = k
            current = base.get(k)
        if isinstance(v, dict):
            replace, v = _replacing(v, key, label, problems)
            if replace or not isinstance(current, (dict, list)):
                # a table arrives where there was nothing (or a scalar), or replaces what was
                # there: only its leaves are this layer's, the rest stays "default"
                _forget_below(merged, key, current)
                merged.provenance.pop(key, None)
                base[slot] = {}
                current = base[slot]
            _merge_into(current, v, key, label, merged, problems)
            continue
        v = _without_markers(v)  # a list replaces what was there anyway
        base[slot] = v
        _forget_below(merged, key, current)
        merged.provenance.pop(key, None)
        _record_leaves(merged, v, key, label)


def _without_markers(value: Any) -> Any:
    """A deep copy of ``value`` with every ``_replace`` key of its tables dropped."""
    if isinstance(value, dict):
        return {k: _without_markers(v) for k, v in value.items() if k != REPLACE_KEY}
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return copy.deepcopy(value)


def _record_leaves(merged: Merged, value: Any, key: Key, label: str) -> None:
    """Attribute each leaf of ``value`` (tables of a list included) to ``label``."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, item in enumerate(value):
            _record_leaves(merged, item, key + (str(i),), label)
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            _record_leaves(merged, v, key + (k,), label)
    else:
        merged.provenance[key] = label
