"""By-reference payloads: what travels beside a controller call instead of inside it.

Weights go from the actor to the rollout engines by reference: in Ray mode as an ``ObjectRef``
(the bytes sit in the object store), in ``--local`` as a :class:`LocalRef` (the object stays
where it is, in this one process). Both arrive wrapped in a one-element list so that Ray hands
the reference itself to the next actor instead of resolving it early; :func:`resolve` turns
either back into the payload. The controller's traffic meter counts a reference as a
reference in both modes, never as the bytes behind it.
"""

from __future__ import annotations

import sys
from typing import Any


class LocalRef:
    """An object handed over by reference inside one process (the twin of a Ray ObjectRef)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> Any:
        # Pickling would copy the payload into the stream: the very thing a reference avoids.
        raise TypeError("a LocalRef refers to an object in this process; it cannot be pickled")


def is_reference(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`LocalRef` or a Ray ``ObjectRef`` (without importing Ray)."""
    if isinstance(obj, LocalRef):
        return True
    ray = sys.modules.get("ray")
    return ray is not None and isinstance(obj, ray.ObjectRef)


def resolve(ref: Any, *, timeout: float | None = None) -> Any:
    """The payload behind a :class:`LocalRef` or a Ray ``ObjectRef`` (waiting ``timeout`` s)."""
    if isinstance(ref, LocalRef):
        return ref.value
    import ray

    return ray.get(ref, timeout=timeout)
