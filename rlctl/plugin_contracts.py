"""Checking what a plugin built against its kind's contract, when the recipe loads.

A kind may declare a contract (``PluginKind.contract`` in :mod:`rlctl.hookspecs`: a
``typing.Protocol`` named by its ``"module:attr"`` path). :func:`contract_problems` says what
an object lacks of it: every method the Protocol defines must be callable, every attribute it
annotates must be there (and of the annotated builtin type: ``int``, ``float``, ``str``,
``bool``). A plugin written as a plain class with the documented members passes; one that
forgot a member is named at ``config validate``, not by an ``AttributeError`` at step 1.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

_BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def protocol_members(protocol: type) -> tuple[list[str], dict[str, str]]:
    """``(methods, {attribute: annotation})`` a Protocol declares (its own and its bases')."""
    methods: list[str] = []
    attributes: dict[str, str] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, typing.Protocol, typing.Generic):
            continue
        for name, annotation in vars(cls).get("__annotations__", {}).items():
            attributes[name] = annotation if isinstance(annotation, str) else \
                getattr(annotation, "__name__", str(annotation))
        for name, value in vars(cls).items():
            if not name.startswith("_") and inspect.isfunction(value) and name not in methods:
                methods.append(name)
    return methods, attributes


def contract_problems(obj: object, protocol: type) -> list[str]:
    """What ``obj`` lacks of ``protocol`` (empty: it fits), one phrase each."""
    methods, attributes = protocol_members(protocol)
    missing: list[str] = []
    for name, annotation in attributes.items():
        value = getattr(obj, name, _MISSING)
        want = _BUILTIN_TYPES.get(annotation)
        if value is _MISSING:
            missing.append(f"{name} (an attribute: {annotation})")
        elif want is not None and (not isinstance(value, want)
                                   or (want is int and isinstance(value, bool))):
            missing.append(f"{name} (an {annotation}; got {value!r})")
    missing += [f"{name}()" for name in methods if not callable(getattr(obj, name, None))]
    return missing


def where_defined(obj: object) -> str:
    """``file:line`` of ``obj``'s class (how errors point a plugin author at it)."""
    cls = type(obj)
    try:
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        return f"{cls.__module__}.{cls.__qualname__}"


_MISSING: Any = object()
