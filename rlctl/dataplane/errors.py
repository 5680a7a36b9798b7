"""The errors every data-plane backend raises, by type (import them from ``rlctl.dataplane``).

Callers and the contract suite (:mod:`rlctl.testing.dataplane_contract`) tell errors apart
by type and by the attributes below, never by message wording: the message is for people.
Each class also derives from the built-in exception a plain ``except`` would expect
(``LookupError``, ``ValueError``, ``RuntimeError``), and the specific classes derive from the
broader ones, so code that catches ``FieldLayoutError`` or ``ValueError`` still catches a
``ShapeMismatchError``.

Extra attributes are keyword arguments with defaults and the message stays the only
positional argument, so the errors survive pickling (a Ray actor's reply carries them).
"""

from __future__ import annotations

from collections.abc import Sequence


class DataPlaneError(Exception):
    """Base of every data-plane error."""


class UnknownKeyError(DataPlaneError, LookupError):
    """A key asked for is not in the partition.

    ``keys``: the unknown keys (all of them; the message shows the first few).
    """

    def __init__(self, message: str, *, keys: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.keys: tuple[str, ...] = tuple(keys)


class MissingFieldError(DataPlaneError, LookupError):
    """A field asked for has not been written for some (or all) of the keys.

    ``field``: the field; ``keys``: the keys that lack it.
    """

    def __init__(self, message: str, *, field: str = "", keys: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.field = field
        self.keys: tuple[str, ...] = tuple(keys)


class FieldLayoutError(DataPlaneError, ValueError):
    """A field's values cannot be put or assembled the way they were given.

    Raised as is for unsupported value types, objects mixed with tensors in one field and
    several dtypes in one field; the two cases below have their own subclasses.
    """


class RowCountError(FieldLayoutError):
    """A batched put whose field has a different number of rows than there are keys."""


class ShapeMismatchError(FieldLayoutError):
    """A get gathers rows of one field whose per-sample shapes differ.

    Each put is consistent in itself, so this is found at get time: a field put dense
    (``[B, ...]``) by several puts with different trailing shapes, or variable-length rows
    with different trailing dims. Put variable-length values jagged instead.
    """


class DuplicateKeyError(DataPlaneError, ValueError):
    """A batched put names the same key more than once."""


class TagCountError(DataPlaneError, ValueError):
    """A batched put whose ``tags`` list does not hold exactly one dict per key."""


class DataPlaneClosedError(DataPlaneError, RuntimeError):
    """The data plane was used after ``close()``."""


__all__ = [
    "DataPlaneClosedError",
    "DataPlaneError",
    "DuplicateKeyError",
    "FieldLayoutError",
    "MissingFieldError",
    "RowCountError",
    "ShapeMismatchError",
    "TagCountError",
    "UnknownKeyError",
]
