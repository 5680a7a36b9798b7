"""The public KV calls every built-in backend shares, written once over two primitives.

A put validates its arguments and encodes the fields into one column block
(:mod:`rlctl.dataplane.columns`); a get validates the open state and hands plain lists on.
What differs between backends is only where a block goes and how rows come back, so a
backend subclasses :class:`BlockDataPlane` and supplies:

* ``_register(partition_id, keys, tags, block)``: store ``block`` (``None`` for a tag-only
  put) and merge ``tags`` (``None`` or one dict per key) atomically;
* ``_read(partition_id, keys, fields, layout, pad_value) -> TensorDict``: the rows of
  ``keys`` (lists here), batch ``[B]``;
* ``backend``: its registered name, used in error messages;
* ``_copy_on_put()`` when the encoded block must not alias the caller's tensors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tensordict import TensorDict

from rlctl.dataplane import columns
from rlctl.dataplane.contract import DataPlaneBase, DataPlaneClosedError, Layout, check_put_args


class BlockDataPlane(DataPlaneBase, ABC):
    """Base of the built-in backends: kv_put / kv_batch_put / kv_batch_get and the closed check."""

    backend: ClassVar[str]
    _closed: bool

    def _copy_on_put(self) -> bool:
        """Whether a put copies the caller's tensors while encoding (default: no, views)."""
        return False

    @abstractmethod
    def _register(self, partition_id: str, keys: list[str], tags, block) -> None:
        """Store ``block`` and merge ``tags`` atomically (see the module docstring)."""

    @abstractmethod
    def _read(
        self,
        partition_id: str,
        keys: list[str],
        fields: list[str],
        layout: Layout,
        pad_value: float,
    ) -> TensorDict:
        """The rows of ``keys``, batch ``[B]`` (see the module docstring)."""

    # ------------------------------------------------------------------ writes
    def kv_put(
        self,
        key: str,
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tag: dict[str, Any] | None = None,
    ) -> None:
        tags = None if tag is None else [tag]
        keys = check_put_args([key], tags, fields)
        block = None if fields is None else columns.encode_single(fields, copy=self._copy_on_put())
        self._register(partition_id, keys, tags, block)

    def kv_batch_put(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Mapping[str, Any] | TensorDict | None = None,
        tags: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        keys = check_put_args(keys, tags, fields)
        block = (
            None if fields is None else columns.encode(fields, len(keys), copy=self._copy_on_put())
        )
        self._register(partition_id, keys, tags, block)

    # ------------------------------------------------------------------ reads
    def kv_batch_get(
        self,
        keys: Sequence[str],
        partition_id: str,
        fields: Sequence[str],
        *,
        layout: Layout = "jagged",
        pad_value: float = 0,
    ) -> TensorDict:
        self._check_open()
        return self._read(partition_id, list(keys), list(fields), layout, pad_value)

    # ------------------------------------------------------------------ lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise DataPlaneClosedError(f"this {self.backend} data plane was closed; open a new one")
