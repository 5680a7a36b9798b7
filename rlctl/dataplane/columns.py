"""Turning a put's fields into a *block* of columns, and columns back into a TensorDict.

A block holds what one ``kv_batch_put`` wrote: ``{field: Column}``, row ``i`` belonging to
``keys[i]``. Three column kinds:

* ``dense``: ``data [B, ...]``;
* ``jagged``: ``data [N, ...]`` + ``offsets [B+1]`` (no padding stored);
* ``object``: a list of B Python objects.

``data`` is a torch tensor (memory backend) or a numpy array (Ray object store: numpy is
zero-copy there, torch pickling is not). Reads go through :func:`assemble`, which gathers
rows from any number of blocks with one copy per field and returns fresh, writable tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from rlctl.dataplane import jagged
from rlctl.dataplane.contract import FieldLayoutError, Layout, RowCountError, ShapeMismatchError
from rlctl.dataplane.npbridge import fresh_copy, np_view, to_torch

Kind = Literal["dense", "jagged", "object"]
Block = dict[str, "Column"]


@dataclass(frozen=True)
class Column:
    """One field of one block."""

    kind: Kind
    data: Any  # dense [B, ...] / jagged values [N, ...] (torch or numpy) / list of objects
    offsets: Any = None  # jagged only: [B+1] int64
    dtype: str = ""  # torch dtype name, e.g. "bfloat16" (numpy cannot hold every torch dtype)

    @property
    def rows(self) -> int:
        if self.kind == "jagged":
            return len(self.offsets) - 1
        return len(self.data)


# --------------------------------------------------------------------------- encode


def encode(fields: Mapping[str, Any] | TensorDict, batch: int, *, copy: bool = True) -> Block:
    """Columns of a batched put; ``copy`` detaches stored data from the caller's tensors."""
    items = _items(fields)
    block: Block = {}
    for name, value in items:
        block[name] = _encode_one(name, value, batch, copy)
    return block


def encode_single(fields: Mapping[str, Any] | TensorDict, *, copy: bool = True) -> Block:
    """Columns of a one-sample put: tensor values are that sample's row (no batch dim)."""
    if isinstance(fields, TensorDict):
        if tuple(fields.batch_size) != (1,):
            fields = fields.unsqueeze(0) if not fields.batch_size else fields
        return encode(fields, 1, copy=copy)
    batched: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, torch.Tensor) and value.is_nested:
            batched[name] = value  # a one-row nested tensor: already batched
        elif isinstance(value, torch.Tensor):
            batched[name] = value.unsqueeze(0)
        elif isinstance(value, np.ndarray):
            batched[name] = torch.from_numpy(value).unsqueeze(0)
        elif isinstance(value, bool | int | float):
            batched[name] = torch.tensor([value])
        elif (
            isinstance(value, list | tuple)
            and len(value) == 1
            and isinstance(value[0], torch.Tensor)
        ):
            batched[name] = list(value)  # [tensor]: one variable-length row
        else:
            batched[name] = [value]
    return encode(batched, 1, copy=copy)


def _items(fields: Mapping[str, Any] | TensorDict) -> list[tuple[str, Any]]:
    if isinstance(fields, TensorDict):
        out = []
        for name in fields.keys():  # noqa: SIM118 (a TensorDict iterates its batch)
            value = fields.get(name)
            if isinstance(value, TensorDict) and not isinstance(
                value, NonTensorStack | NonTensorData
            ):
                raise FieldLayoutError(
                    f"field {name!r} is a nested TensorDict; put its leaves as separate fields"
                )
            out.append((name, value))
        return out
    return list(fields.items())


def _encode_one(name: str, value: Any, batch: int, copy: bool) -> Column:
    if isinstance(value, NonTensorData):
        return Column("object", [value.data] * batch)
    if isinstance(value, NonTensorStack):
        value = value.tolist()
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if isinstance(value, torch.Tensor) and value.is_nested:
        if value.layout == torch.jagged:
            values, offsets = jagged.unpack(value)
            start = int(offsets[0])
            values, offsets = values[start : int(offsets[-1])], offsets - start
        else:  # strided nested tensor: go through its rows
            values, offsets = jagged.pack(list(value.unbind()))
        _check_rows(name, len(offsets) - 1, batch)
        values = values.detach()
        return Column(
            "jagged",
            fresh_copy(values) if copy else values,
            fresh_copy(offsets),
            _dtype_name(values),
        )
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            raise FieldLayoutError(
                f"field {name!r} is a 0-d tensor; a batched put needs [B, ...] (B={batch})"
            )
        _check_rows(name, value.shape[0], batch)
        value = value.detach()
        data = fresh_copy(value) if copy or not value.is_contiguous() else value
        return Column("dense", data, None, _dtype_name(value))
    if isinstance(value, list | tuple):
        _check_rows(name, len(value), batch)
        if value and all(isinstance(v, torch.Tensor) for v in value):
            try:
                values, offsets = jagged.pack([v.detach() for v in value])
            except ValueError as exc:
                raise FieldLayoutError(f"field {name!r}: {exc}") from None
            return Column("jagged", values, offsets, _dtype_name(values))
        return Column("object", list(value))
    raise FieldLayoutError(
        f"field {name!r} has unsupported type {type(value).__name__}: put a tensor [B, ...], "
        "a jagged nested tensor, a list of B tensors or a list of B objects"
    )


def _check_rows(name: str, rows: int, batch: int) -> None:
    if rows != batch:
        raise RowCountError(f"field {name!r} has {rows} rows but {batch} keys were given")


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


# --------------------------------------------------------------------------- numpy form


def to_numpy(block: Block) -> Block:
    """The same block with tensors as numpy arrays (for the Ray object store; no copy)."""
    return {name: _col_to_numpy(col) for name, col in block.items()}


def _col_to_numpy(col: Column) -> Column:
    if col.kind == "object":
        return col
    offsets = np_view(col.offsets) if col.offsets is not None else None
    return Column(col.kind, np_view(col.data), offsets, col.dtype)


def _np(data: Any) -> np.ndarray:
    return data if isinstance(data, np.ndarray) else np_view(data)


def _offsets(col: Column) -> np.ndarray:
    return _np(col.offsets).astype(np.int64, copy=False)


# --------------------------------------------------------------------------- assemble


def assemble(
    blocks: Mapping[int, Block],
    locs: Mapping[str, Sequence[tuple[int, int]]],
    batch: int,
    *,
    layout: Layout = "jagged",
    pad_value: float = 0,
    copy: bool = True,
) -> TensorDict:
    """A TensorDict ``[batch]`` with, per field, the rows ``locs[field]`` of ``blocks``.

    Gathers run on numpy (single-threaded copies, see :mod:`rlctl.dataplane.npbridge`).
    ``copy=False`` returns views of the stored data where the rows are one contiguous run of
    one block (the common case: a worker reads what one put wrote). Such views alias the
    store: writing into them corrupts it for every other reader.
    """
    if layout not in ("jagged", "padded"):
        raise ValueError(f"layout must be 'jagged' or 'padded', got {layout!r}")
    out: dict[str, Any] = {}
    for name, field_locs in locs.items():
        if not field_locs:  # an empty get: nothing to tell the field's kind from
            continue
        cols = [(blocks[b][name], row) for b, row in field_locs]
        out[name] = _assemble_field(name, cols, layout, pad_value, copy)
    return TensorDict(out, batch_size=[batch])


def _assemble_field(
    name: str, cols: list[tuple[Column, int]], layout: Layout, pad_value: float, copy: bool
) -> Any:
    kinds = {c.kind for c, _ in cols}
    if "object" in kinds:
        if kinds != {"object"}:
            raise FieldLayoutError(
                f"field {name!r} holds objects for some keys and tensors for others"
            )
        return NonTensorStack.from_list([c.data[r] for c, r in cols])
    dtypes = {c.dtype for c, _ in cols}
    if len(dtypes) != 1:
        raise FieldLayoutError(f"field {name!r} was put with several dtypes {sorted(dtypes)}")
    dtype = getattr(torch, dtypes.pop())
    if kinds == {"dense"}:
        return to_torch(_gather_dense(name, cols, copy), dtype)
    run = _contiguous_jagged_run(cols)
    if run is not None:
        values, offsets = run
        if copy and layout == "jagged":
            values = np.array(values, copy=True)
    else:
        values, offsets = _gather_jagged(name, cols)
    if layout == "padded":
        return to_torch(_pad(values, offsets, pad_value, dtype), dtype)
    return torch.nested.nested_tensor_from_jagged(
        to_torch(values, dtype), torch.from_numpy(offsets)
    )


def _pad(
    values: np.ndarray, offsets: np.ndarray, pad_value: float, dtype: torch.dtype
) -> np.ndarray:
    """Right-pad ``values [N, ...]`` to ``[B, Lmax, ...]`` (numpy, one thread)."""
    lens = np.diff(offsets)
    tmax = int(lens.max()) if len(lens) else 0
    fill = np_view(torch.tensor([pad_value], dtype=dtype))[
        0
    ]  # the pad's bits in the stand-in dtype
    out = np.full((len(lens), tmax, *values.shape[1:]), fill, dtype=values.dtype)
    # One slice copy per sample: cheaper than fancy indexing with [N]-sized index arrays.
    for i, (start, end) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)):
        out[i, : end - start] = values[start:end]
    return out


def _runs(cols: list[tuple[Column, int]]) -> dict[int, tuple[Column, list[int], list[int]]]:
    """Group requested rows by block: ``id(col) -> (col, output positions, block rows)``."""
    groups: dict[int, tuple[Column, list[int], list[int]]] = {}
    for pos, (col, row) in enumerate(cols):
        entry = groups.setdefault(id(col), (col, [], []))
        entry[1].append(pos)
        entry[2].append(row)
    return groups


def _contiguous_jagged_run(cols: list[tuple[Column, int]]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(values view, offsets)`` when the rows are consecutive rows of one jagged column."""
    col, first = cols[0]
    if col.kind != "jagged" or any(c is not col or r != first + i for i, (c, r) in enumerate(cols)):
        return None
    offsets = _offsets(col)[first : first + len(cols) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    return _np(col.data)[start:end], offsets - start


def _gather_dense(name: str, cols: list[tuple[Column, int]], copy: bool) -> np.ndarray:
    groups = _runs(cols)
    shapes = {tuple(col.data.shape[1:]) for col, _, _ in groups.values()}
    if len(shapes) != 1:
        raise ShapeMismatchError(
            f"field {name!r} was put dense with different per-sample shapes {sorted(shapes)}; "
            "put variable-length fields as a jagged nested tensor or a list of tensors"
        )
    if len(groups) == 1:
        col, _, rows = next(iter(groups.values()))
        src = _np(col.data)
        if rows == list(range(rows[0], rows[0] + len(rows))):  # a contiguous run: one memcpy
            view = src[rows[0] : rows[0] + len(rows)]
            return np.array(view, copy=True) if copy else view
        return np.take(src, rows, axis=0)
    first = _np(next(iter(groups.values()))[0].data)
    out = np.empty((len(cols), *first.shape[1:]), dtype=first.dtype)
    for col, positions, rows in groups.values():
        out[positions] = np.take(_np(col.data), rows, axis=0)
    return out


def _gather_jagged(name: str, cols: list[tuple[Column, int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(values [N, ...], offsets [B+1])`` of the requested rows, in request order.

    One fancy-indexed copy per block involved (index arrays built with numpy), not a slice
    per row: a rank reading half a step's samples touches 256 scattered rows per field.
    """
    if any(col.kind != "jagged" for col, _ in cols):
        return _gather_mixed(name, cols)
    groups = _runs(cols)
    trailing = {tuple(_np(col.data).shape[1:]) for col, _, _ in groups.values()}
    if len(trailing) > 1:
        raise ShapeMismatchError(
            f"field {name!r} rows have different trailing shapes {sorted(trailing)}"
        )
    starts = np.empty(len(cols), dtype=np.int64)  # [B] where each row begins in its block
    lens = np.empty(len(cols), dtype=np.int64)  # [B]
    for col, positions, rows in groups.values():
        block_offsets, at, pos = _offsets(col), np.asarray(rows), np.asarray(positions)
        starts[pos] = block_offsets[at]
        lens[pos] = block_offsets[at + 1] - block_offsets[at]
    offsets = np.zeros(len(cols) + 1, dtype=np.int64)  # [B+1] of the output
    np.cumsum(lens, out=offsets[1:])
    if len(groups) == 1:  # one block: a single gather, already in request order
        col = next(iter(groups.values()))[0]
        return _np(col.data)[_ranges(starts, lens)], offsets
    first = _np(next(iter(groups.values()))[0].data)
    out = np.empty((int(offsets[-1]), *first.shape[1:]), dtype=first.dtype)  # [N, ...]
    for col, positions, _ in groups.values():
        pos = np.asarray(positions)
        out[_ranges(offsets[pos], lens[pos])] = _np(col.data)[_ranges(starts[pos], lens[pos])]
    return out, offsets


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + n) for s, n in zip(starts, lens))`` without a Python loop."""
    before = np.cumsum(lens) - lens  # [B] output position of each range's first index
    return np.repeat(starts - before, lens) + np.arange(int(lens.sum()), dtype=np.int64)


def _gather_mixed(name: str, cols: list[tuple[Column, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The per-row path, for a jagged field some of whose rows were put dense."""
    pieces: list[np.ndarray] = []
    trailing: set[tuple[int, ...]] = set()
    for col, row in cols:
        data = _np(col.data)
        if col.kind == "jagged":
            offsets = _offsets(col)
            piece = data[int(offsets[row]) : int(offsets[row + 1])]
        else:  # a dense row joins a jagged field as one sample of length shape[0]
            if data.ndim < 2:
                raise FieldLayoutError(
                    f"field {name!r} mixes per-sample scalars with variable-length rows"
                )
            piece = data[row]
        trailing.add(tuple(piece.shape[1:]))
        pieces.append(piece)
    if len(trailing) > 1:
        raise ShapeMismatchError(
            f"field {name!r} rows have different trailing shapes {sorted(trailing)}"
        )
    offsets = np.zeros(len(cols) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    return np.concatenate(pieces), offsets
