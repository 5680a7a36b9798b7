"""Finished samples from the data plane to a checkpoint directory and back.

A streaming checkpoint holds the samples already generated for steps not yet trained
(docs/streaming.md, "Checkpoints"). Their tensors go to ``samples.safetensors`` (no pickle:
a checkpoint is read back by a later process and must not run code), their keys, tags and
field layout to ``samples.json``. A jagged field ``f`` is stored as ``f/values`` [N, ...]
and ``f/offsets`` [B'+1]; a dense one as ``f`` [B', ...]; ``B'`` counts the samples that
have the field (``rows`` in the JSON), since a failed sample has tags only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SAMPLES_JSON = "samples.json"
SAMPLES_TENSORS = "samples.safetensors"
FORMAT_VERSION = 1


def save_samples(plane: Any, partition: str, keys: Sequence[str], tags: Sequence[dict[str, Any]],
                 fields: Sequence[str], out_dir: str | Path) -> int:
    """Write ``keys`` of ``partition`` (their ``tags`` and every one of ``fields`` they have)
    into ``out_dir``; returns how many samples were written."""
    from safetensors.torch import save_file

    from rlctl.dataplane import jagged

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keys = list(keys)
    tensors: dict[str, Any] = {}
    layout: dict[str, dict[str, Any]] = {}
    for name in fields:
        rows, value = _read(plane, partition, keys, name)
        if not rows:
            continue
        if jagged.is_jagged(value):
            values, offsets = jagged.unpack(value)
            tensors[f"{name}/values"] = values.contiguous().clone()
            tensors[f"{name}/offsets"] = (offsets - offsets[0]).contiguous().clone()
            layout[name] = {"layout": "jagged", "rows": rows}
        elif hasattr(value, "is_nested"):  # a dense tensor [B', ...]
            tensors[name] = value.contiguous().clone()
            layout[name] = {"layout": "dense", "rows": rows}
        else:  # strings, dicts: JSON
            layout[name] = {"layout": "objects", "rows": rows, "values": list(value.tolist())}
    save_file(tensors, str(out / SAMPLES_TENSORS))
    meta = {"format": FORMAT_VERSION, "partition": partition, "keys": keys,
            "tags": [dict(t) for t in tags], "fields": layout}
    (out / SAMPLES_JSON).write_text(json.dumps(meta))
    return len(keys)


def _read(plane: Any, partition: str, keys: list[str], name: str) -> tuple[list[int], Any]:
    """The rows of ``keys`` that have field ``name`` and its values for them."""
    from rlctl.dataplane.errors import MissingFieldError

    rows = list(range(len(keys)))
    try:
        return rows, plane.kv_batch_get(keys, partition, [name])[name]
    except MissingFieldError as exc:  # failed samples (tags only), or a field some lack
        lacking = set(exc.keys)
    rows = [i for i, k in enumerate(keys) if k not in lacking]
    if not rows:
        return [], None
    return rows, plane.kv_batch_get([keys[i] for i in rows], partition, [name])[name]


def load_samples(plane: Any, in_dir: str | Path) -> list[str]:
    """Put the samples written by :func:`save_samples` back into the data plane (their own
    partition, keys and tags); returns their keys."""
    from safetensors.torch import load_file
    from tensordict import TensorDict

    src = Path(in_dir)
    meta = json.loads((src / SAMPLES_JSON).read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{src / SAMPLES_JSON}: sample format {meta.get('format')!r} is not "
                         f"{FORMAT_VERSION}: written by an incompatible rlctl")
    tensors = load_file(str(src / SAMPLES_TENSORS))
    keys, tags, partition = meta["keys"], meta["tags"], meta["partition"]
    per_row: list[dict[str, Any]] = [{} for _ in keys]
    for name, spec in meta["fields"].items():
        for row, value in zip(spec["rows"], _rows(name, spec, tensors), strict=True):
            per_row[row][name] = value
    # One put per set of fields (a put gives every key the same fields); tags go with the
    # fields so a sample turns terminal only once its tensors are there.
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, row in enumerate(per_row):
        groups.setdefault(tuple(sorted(row)), []).append(i)
    for names, idx in groups.items():
        fields = None
        if names:
            fields = TensorDict({}, batch_size=[len(idx)])
            for name in names:
                fields[name] = _column([per_row[i][name] for i in idx],
                                       meta["fields"][name]["layout"])
        plane.kv_batch_put([keys[i] for i in idx], partition, fields, [tags[i] for i in idx])
    return list(keys)


def stored_fields(in_dir: str | Path) -> list[str]:
    """The field names :func:`save_samples` wrote into ``in_dir``."""
    return sorted(json.loads((Path(in_dir) / SAMPLES_JSON).read_text())["fields"])


def _rows(name: str, spec: dict[str, Any], tensors: dict[str, Any]) -> list[Any]:
    """Per-sample values of one stored field, in ``spec["rows"]`` order."""
    kind = spec["layout"]
    if kind == "objects":
        return list(spec["values"])
    if kind == "dense":
        return list(tensors[name].unbind(0))
    values, offsets = tensors[f"{name}/values"], tensors[f"{name}/offsets"].tolist()
    return [values[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def _column(values: list[Any], kind: str) -> Any:
    import torch

    from rlctl.dataplane import jagged

    if kind == "jagged":
        return jagged.from_list(values)
    if kind == "dense":
        return torch.stack(values)
    return values
