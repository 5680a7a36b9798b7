"""Rows of a prompt file: parquet, JSONL, or a directory written by HF ``datasets``.

Each reader returns the rows as plain dicts (column -> value), the same shape for every
format, so that :class:`rlctl.tasks.file_source.FilePromptSource` maps columns one way:

* ``.parquet`` - verl's layout, read with pyarrow;
* ``.jsonl`` - one JSON object per line (blank lines skipped);
* a directory - ``Dataset.save_to_disk`` output, read with ``datasets.load_from_disk``
  (``pip install datasets``); a ``DatasetDict`` directory must be narrowed to one split.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Rows = list[dict[str, Any]]
FORMATS = "a parquet file (.parquet), a JSONL file (.jsonl), or a directory saved by HF datasets"


def read_rows(path: Path, *, what: str) -> Rows:
    """The rows at ``path``; ``what`` names the recipe key in errors (``[data] train``)."""
    if path.is_dir():
        return _read_dataset_dir(path, what)
    if not path.is_file():
        raise FileNotFoundError(f"{what}: {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.suffix == ".jsonl":
        return _read_jsonl(path, what)
    raise ValueError(f"{what}: {str(path)!r} is not {FORMATS}")


def _read_jsonl(path: Path, what: str) -> Rows:
    rows: Rows = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{what}: {path} line {number} is not JSON ({exc.msg}, "
                    f"column {exc.colno}); each line must be one JSON object"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(f"{what}: {path} line {number} is a JSON "  # noqa: TRY004 -- bad data
                                 f"{type(row).__name__}, not an object with one key per column")
            rows.append(row)
    return rows


def _read_dataset_dir(path: Path, what: str) -> Rows:
    try:
        from datasets import Dataset, DatasetDict, load_from_disk
    except ImportError:
        raise ValueError(f"{what}: {str(path)!r} is a directory; reading HF datasets "
                         "directories needs the datasets package: pip install datasets") from None
    try:
        data = load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise ValueError(f"{what}: {str(path)!r} is a directory but not one written by "
                         f"datasets' save_to_disk ({exc}); give {FORMATS}") from None
    if isinstance(data, DatasetDict):
        splits = ", ".join(data)
        raise ValueError(f"{what}: {str(path)!r} holds several splits ({splits}); give one "  # noqa: TRY004
                         f"split's directory, e.g. {path / next(iter(data))}")
    assert isinstance(data, Dataset)
    return data.to_list()
