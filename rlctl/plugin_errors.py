"""A plugin's implementation that raised at run time, reported so its author can act on it.

Rewards and advantage estimators run deep inside workers; an exception there used to arrive
as a bare ``ValueError: ...`` with no hint of which plugin or name produced it. The call
sites wrap it in :class:`PluginCallError`, whose message names the plugin (distribution and
entry point), the kind, the name, the exception type and the file:line that raised::

    reward function "shout" of plugin shout (entry point `shout = shout_pkg.plugin` of
    shout-pkg 0.1) raised ZeroDivisionError: division by zero at shout_pkg/rewards.py:12
    in shout
"""

from __future__ import annotations

import inspect
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlctl.registry import Registration


class PluginCallError(RuntimeError):
    """A registered implementation raised (or broke its contract) while rlctl called it.

    Attributes: ``kind`` and ``name`` (what the recipe selected), ``plugin`` (the plugin's
    name), ``error_type`` (the original exception's class name, ``""`` for a contract
    violation) and ``location`` (``file:line`` where it was raised, ``""`` when unknown).
    The original exception is ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        plugin: str = "",
        error_type: str = "",
        location: str = "",
    ) -> None:
        super().__init__(message)
        self.kind, self.name, self.plugin = kind, name, plugin
        self.error_type, self.location = error_type, location

    @classmethod
    def from_exception(
        cls, reg: Registration, exc: BaseException, fn: Any = None
    ) -> PluginCallError:
        """Wrap ``exc`` raised by ``reg``'s implementation ``fn`` (raise it ``from exc``)."""
        location = _location(exc, fn)
        where = f" at {location}" if location else ""
        return cls(
            f"{reg.describe()} raised {type(exc).__name__}: {exc}{where}",
            kind=reg.kind,
            name=reg.name,
            plugin=reg.plugin.name,
            error_type=type(exc).__name__,
            location=location,
        )

    @classmethod
    def contract(cls, reg: Registration, what: str, fn: Any = None) -> PluginCallError:
        """``reg``'s implementation returned something rlctl cannot use; ``fn``: the function
        or method that returned it (its definition's ``file:line`` is named)."""
        location = defined_at(fn)
        where = f" (defined at {location})" if location else ""
        return cls(f"{reg.describe()} {what}{where}", kind=reg.kind, name=reg.name,
                   plugin=reg.plugin.name, location=location)

    def within(self, context: str) -> PluginCallError:
        """The same error with what rlctl was doing appended (``while scoring sample ...``)."""
        return PluginCallError(
            f"{self} while {context}", kind=self.kind, name=self.name, plugin=self.plugin,
            error_type=self.error_type, location=self.location,
        )


def _location(exc: BaseException, fn: Any) -> str:
    """``file:line in func`` where ``exc`` was raised, plus the plugin's own frame if deeper.

    The innermost frame is where it was raised (perhaps inside a library); the innermost
    frame in ``fn``'s own file is the plugin line that called it.
    """
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return ""
    raised = frames[-1]
    text = f"{raised.filename}:{raised.lineno} in {raised.name}"
    own_file = _source_file(fn)
    own = next((f for f in reversed(frames) if f.filename == own_file), None)
    if own is not None and own is not raised:
        text += f" (called from {own.filename}:{own.lineno} in {own.name})"
    return text


def defined_at(fn: Any) -> str:
    """``file:line in name`` where function or method ``fn`` is defined (``""``: unknown)."""
    if fn is None:
        return ""
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    try:
        file = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return ""
    return f"{file}:{line} in {getattr(target, '__qualname__', getattr(target, '__name__', '?'))}"


def _source_file(fn: Any) -> str | None:
    """The file ``fn`` (a function, a class or a callable instance) is defined in."""
    if fn is None:
        return None
    target = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(target, "__code__", None)
    if code is None:  # a class or a callable instance: the file its class is defined in
        owner = target if isinstance(target, type) else type(target)
        try:
            return inspect.getsourcefile(owner)
        except TypeError:
            return None
    return code.co_filename
