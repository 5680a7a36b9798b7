"""Loading ``torch.distributed.checkpoint`` directories without running code from them.

A DCP checkpoint holds two kinds of pickles, and torch unpickles both without restriction:

* ``.metadata``: the index of every tensor and byte blob (``FileSystemReader.read_metadata``
  calls ``pickle.load``);
* byte items in the shards (every non-tensor leaf: LR-scheduler counters, optimizer
  hyper-parameters), read with ``torch.load(weights_only=False)`` by the default planners.

A checkpoint is a file anyone can hand over (``--resume PATH``, ``rlctl export``), so a
crafted one would run a shell command. Here ``.metadata`` goes through
:class:`MetadataUnpickler` (only the classes a DCP ``Metadata`` is made of), byte items must
pass ``torch.load(weights_only=True)`` (tensors and plain containers) before torch's planner
sees them, and every failure, torch's ``CheckpointException`` included (a ``BaseException``
that slips past ``except Exception``), becomes a :class:`CheckpointError` naming the
checkpoint.
"""

from __future__ import annotations

import io
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import load as dcp_load
from torch.distributed.checkpoint import save as dcp_save
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import (
    DefaultLoadPlanner,
    _EmptyStateDictLoadPlanner,
)
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from rlctl import regular_file
from rlctl.checkpoint.manager import CheckpointDamaged, CheckpointError

METADATA_FILE = ".metadata"

# module -> names: the classes (and value lookups) a DCP Metadata pickle refers to. Nothing
# here runs code beyond building a plain object: dataclasses, enums, torch.Size, paths.
_ALLOWED: dict[str, frozenset[str]] = {
    "torch.distributed.checkpoint.metadata": frozenset({
        "Metadata", "MetadataIndex", "StorageMeta", "TensorProperties",
        "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
        "_MEM_FORMAT_ENCODING",
    }),
    "torch.distributed.checkpoint.filesystem": frozenset({"_StorageInfo"}),
    "torch.serialization": frozenset({"_get_layout"}),  # a dict lookup: "torch.strided" -> layout
    "torch": frozenset({"Size"}),
    "pathlib": frozenset({"Path", "PosixPath", "PurePosixPath", "PureWindowsPath"}),
    "collections": frozenset({"OrderedDict"}),
    "builtins": frozenset({"set", "frozenset", "list", "dict", "tuple", "slice", "bytearray"}),
}


class MetadataUnpickler(pickle.Unpickler):
    """Unpickles a DCP ``.metadata`` file; any class outside the allow-list is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)  # dtypes are pickled as references: torch.float32
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name}: a checkpoint's metadata holds only "
            "torch.distributed.checkpoint records (this file was crafted or is not a checkpoint)"
        )


def read_metadata_file(path: Path | str) -> Metadata:
    """The ``Metadata`` in a ``.metadata`` file; :class:`CheckpointError` if it is anything else."""
    path = Path(path)
    try:
        data = regular_file.read_bytes(path)
        metadata = MetadataUnpickler(io.BytesIO(data)).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, ImportError) as exc:
        raise CheckpointDamaged(
            f"{path} is not a readable checkpoint index: {_reason(exc)}") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointDamaged(
            f"{path} is not a checkpoint index (it holds a {type(metadata).__name__})")
    return metadata


class SafeFileSystemReader(FileSystemReader):
    """``FileSystemReader`` whose metadata goes through :class:`MetadataUnpickler`, and whose
    read errors name the shard file they come from."""

    _reading: str | None = None

    def _slice_file(self, file: Any, sinfo: Any) -> Any:
        self._reading = getattr(sinfo, "relative_path", None)  # one item at a time, in order
        return super()._slice_file(file, sinfo)

    def read_data(self, plan: Any, planner: Any) -> Any:
        try:
            return super().read_data(plan, planner)
        except CheckpointError as exc:
            raise CheckpointDamaged(f"{self._reading or 'a shard'}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 -- a torn or overwritten shard: name it
            shard = self._reading or _file_of(exc) or "a shard"
            raise CheckpointDamaged(f"{shard} is damaged: {_reason(exc)}") from None

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        rank = kwargs.get("rank")
        name = METADATA_FILE if rank is None else f"__{rank}{METADATA_FILE}"
        metadata = read_metadata_file(Path(self.path) / name)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id  # what the parent does after loading
        return metadata


def _check_bytes(value: io.BytesIO) -> None:
    """Byte items must unpickle under ``weights_only`` before torch's planner unpickles them.

    The check and the planner read the same in-memory bytes, so what passed is what loads.
    """
    try:
        torch.load(value, weights_only=True)
    except Exception as exc:  # noqa: BLE001 -- UnpicklingError, or a corrupt blob: both refused
        raise CheckpointDamaged(
            f"a non-tensor item is not plain data (crafted or corrupt): {_reason(exc)}") from None
    value.seek(0)


class SafeLoadPlanner(DefaultLoadPlanner):
    """``DefaultLoadPlanner`` that only loads byte items made of plain data."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        _check_bytes(value)
        super().load_bytes(read_item, value)


class _SafeEmptyPlanner(_EmptyStateDictLoadPlanner):
    """Loads a whole checkpoint into an empty dict (what ``dcp_to_torch_save`` uses), safely."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        _check_bytes(value)
        super().load_bytes(read_item, value)


def save(state_dict: dict[str, Any], path: Path | str) -> None:
    """``dcp.save(state_dict, checkpoint_id=path)``; a failure (a full disk...) is a
    :class:`CheckpointError`, not torch's ``CheckpointException`` (a ``BaseException``)."""
    try:
        dcp_save(state_dict, checkpoint_id=path)
    except (CheckpointException, Exception) as exc:  # noqa: BLE001 -- see the docstring
        raise CheckpointError(f"cannot save checkpoint {path}: {_reason(exc)}") from None


def load(state_dict: dict[str, Any], path: Path | str, **kwargs: Any) -> None:
    """``dcp.load(state_dict, checkpoint_id=path)``, safely; errors are :class:`CheckpointError`."""
    _check_index(path)
    _guarded(path, lambda: dcp_load(
        state_dict, storage_reader=SafeFileSystemReader(path), planner=SafeLoadPlanner(),
        **kwargs))


def load_full(path: Path | str) -> dict[str, Any]:
    """Every entry of a checkpoint in this process (no process group), e.g. for an export."""
    _check_index(path)
    planner = _SafeEmptyPlanner()
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": yes
        warnings.filterwarnings("ignore", message=".*single process", category=UserWarning)
        _guarded(path, lambda: dcp_load(
            {}, storage_reader=SafeFileSystemReader(path), planner=planner, no_dist=True))
    # dcp.load hands the planner a copy of the (empty) dict it is given; the planner fills it
    return dict(planner.original_state_dict)


def _check_index(path: Path | str) -> None:
    """Read the index before torch does: torch logs a traceback per failed attempt."""
    try:
        read_metadata_file(Path(path) / METADATA_FILE)
    except CheckpointError as exc:
        raise CheckpointDamaged(f"cannot load checkpoint {path}: {exc}") from None


def _guarded(path: Path | str, run: Any) -> None:
    try:
        run()
    except CheckpointError as exc:
        raise CheckpointDamaged(f"cannot load checkpoint {path}: {exc}") from None
    # CheckpointException is a BaseException: `except Exception` alone would let it through
    except (CheckpointException, Exception) as exc:  # noqa: BLE001
        raise CheckpointDamaged(f"cannot load checkpoint {path}: {_reason(exc)}") from None


def _first_failure(exc: BaseException) -> BaseException:
    """The first rank's error inside a CheckpointException (nested ones too), else ``exc``."""
    if isinstance(exc, CheckpointException):
        failures = getattr(exc, "failures", {}) or {}
        for failure in failures.values():
            inner = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(inner, BaseException):
                return _first_failure(inner)
    return exc


def _file_of(exc: BaseException) -> str | None:
    """The name of the file an OS error is about (a shard that is gone fails before the
    reader knows which item it reads)."""
    inner = _first_failure(exc)
    filename = getattr(inner, "filename", None) if isinstance(inner, OSError) else None
    return Path(filename).name if isinstance(filename, str) and filename else None


def _reason(exc: BaseException) -> str:
    """One line: the first rank's error inside a CheckpointException, else the error itself."""
    exc = _first_failure(exc)
    name = _file_of(exc)
    if name and isinstance(exc, OSError) and exc.strerror:
        # The file's name, not its path: the caller names the directory, and a long path
        # would push what went wrong past the line's cut.
        return f"{type(exc).__name__}: {exc.strerror}: {name}"
    if isinstance(exc, pickle.UnpicklingError) and "weights_only" in str(exc):
        # torch's text advises weights_only=False, exactly what must not be done here
        return ("UnpicklingError: not the plain tensors and values a checkpoint holds "
                "(corrupt, or crafted to run code)")
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    first = first if len(first) <= 160 else first[:157] + "..."
    if isinstance(exc, CheckpointError):
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
