"""Deep merge of source layers, remembering which layer set each value.

Tables merge key by key; any other value (scalar, list) replaces what was there. A table of
numeric keys merged onto a list addresses its elements, so ``-s rewards.0.weight=2`` and
``RLCTL_REWARDS__0__WEIGHT=2`` change one element of ``[[rewards]]``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlctl.config.problems import ConfigProblem, key_path
from rlctl.config.sources import Key, Layer

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
    return merged, problems


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
            if not isinstance(current, (dict, list)):
                # a table arrives where there was nothing (or a scalar): only its leaves
                # are this layer's, the rest stays "default"
                _forget_below(merged, key, current)
                merged.provenance.pop(key, None)
                base[slot] = {}
                current = base[slot]
            _merge_into(current, v, key, label, merged, problems)
            continue
        base[slot] = copy.deepcopy(v)
        _forget_below(merged, key, current)
        merged.provenance.pop(key, None)
        _record_leaves(merged, v, key, label)


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
