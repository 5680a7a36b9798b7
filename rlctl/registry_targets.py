"""Lazy ``"module:attr"`` targets: resolving them, and checking them without importing them.

A plugin registers heavy implementations as strings so that the CLI never imports torch.
:func:`resolve` imports the module (run time). :func:`static_problem` says whether the target
*would* resolve without running the target module: ``importlib.util.find_spec`` locates the
module (this imports its parent packages, not the module itself), and the module's source is
parsed to find ``attr`` among its top-level definitions, assignments and imports. That is
what ``rlctl config validate`` (for the names a recipe selects) and ``rlctl plugins list
--check`` (for every registered name) run, so a typo in a target fails in milliseconds with
the plugin and name, instead of deep inside a worker.

The static check answers "fine" whenever it cannot tell (no source, a module-level
``__getattr__``, ``from x import *``, ``globals()`` / ``setattr`` at module level, an
attribute of something that is not a class defined there): it may miss a broken target but
never rejects one that imports.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

# Module-level names that can create attributes the source does not spell out.
_DYNAMIC = frozenset({"globals", "vars", "setattr", "__getattr__", "exec"})


def split_target(target: str) -> tuple[str, list[str]]:
    """``"pkg.mod:Class.attr"`` -> ``("pkg.mod", ["Class", "attr"])``; ValueError if malformed."""
    module, sep, attr = target.partition(":")
    parts = attr.split(".")
    if not sep or not module.strip() or not all(p.isidentifier() for p in parts):
        raise ValueError(f"target {target!r} is not of the form 'package.module:attr'")
    if not all(p.isidentifier() for p in module.split(".")):
        raise ValueError(f"target {target!r}: {module!r} is not a module path")
    return module, parts


def resolve(target: str) -> Any:
    """Import ``target``'s module and return the attribute (errors say what is missing)."""
    module_name, parts = split_target(target)
    obj: Any = importlib.import_module(module_name)
    where = module_name
    for part in parts:
        if not hasattr(obj, part):
            raise AttributeError(f"{where!r} has no attribute {part!r}{_guess(part, dir(obj))}")
        obj = getattr(obj, part)
        where = f"{where}.{part}"
    return obj


def load_failure(exc: BaseException, *, caller: str = "") -> str:
    """``Type: message (at file:line)`` for an exception :func:`resolve` let through.

    The location is the innermost frame outside the import machinery, this module and
    ``caller`` (the file that called :func:`resolve`): the line of the target module that
    raised (e.g. its ``import missing_lib``). A missing module or attribute has no such
    frame, and its message already says what is missing.
    """
    skip = (__file__, importlib.__file__, caller)
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and f.filename not in skip
    ]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def static_problem(target: object) -> str | None:
    """Why ``target`` will not resolve, found without importing its module; ``None`` if fine."""
    if not isinstance(target, str):
        if target is None or callable(target):
            return None
        return f"target {target!r} is neither callable nor a 'module:attr' string"
    try:
        module_name, parts = split_target(target)
    except ValueError as exc:
        return str(exc)
    loaded = sys.modules.get(module_name)
    if loaded is not None:  # already imported (built-ins, in-process plugins): just look
        try:
            resolve(target)
        except AttributeError as exc:
            return str(exc)
        return None
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception as exc:  # noqa: BLE001 -- a parent package is missing or raises on import
        return f"module {module_name!r} cannot be found ({type(exc).__name__}: {exc})"
    if spec is None:
        return f"no module named {module_name!r}{_sibling_guess(module_name)}"
    scope = _module_scope(spec)
    if scope is None:
        return None  # no source to read (extension or bytecode-only module): cannot tell
    return _missing_attr(scope, spec, module_name, parts)


def static_definition(target: str) -> str | None:
    """How ``target`` is defined, found without running its module: ``"async def"``,
    ``"def"``, ``"class"`` (or the type's name of another object of a module already
    imported); ``None`` when it cannot tell (an assignment, an import, a decorated
    definition, a nested attribute...). :func:`static_problem` says whether it exists."""
    try:
        module_name, parts = split_target(target)
    except ValueError:
        return None
    if module_name in sys.modules:
        try:
            obj = resolve(target)
        except Exception:  # noqa: BLE001 -- static_problem reports a missing attribute
            return None
        if inspect.iscoroutinefunction(obj):
            return "async def"
        return "class" if inspect.isclass(obj) else "def" if callable(obj) else type(obj).__name__
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # noqa: BLE001 -- static_problem reports it
        return None
    tree = _parse(spec) if spec is not None and len(parts) == 1 else None
    if tree is None:
        return None
    kinds = {ast.AsyncFunctionDef: "async def", ast.FunctionDef: "def", ast.ClassDef: "class"}
    found = None
    for node in tree.body:  # the last top-level binding of the name decides
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == parts[0]:
                found = None if node.decorator_list else kinds[type(node)]
        elif parts[0] in _top_level([node])[0]:
            found = None
    return found


_Scope = tuple[set[str], dict[str, list[ast.stmt]], bool]


_SCOPES: dict[tuple[str, str | None], _Scope | None] = {}  # many targets share one module


def _module_scope(spec: Any) -> _Scope | None:
    key = (spec.name, spec.origin)
    if key not in _SCOPES:
        tree = _parse(spec)
        _SCOPES[key] = None if tree is None else _top_level(tree.body)
    return _SCOPES[key]


def _parse(spec: Any) -> ast.Module | None:
    get_source = getattr(spec.loader, "get_source", None)
    if get_source is None:
        return None
    try:
        source = get_source(spec.name)
    except Exception:  # noqa: BLE001 -- unreadable source: leave it to the real import
        return None
    if source is None:
        return None
    try:
        return ast.parse(source)
    except SyntaxError:
        return None  # the import will report it with the right line


def _missing_attr(scope: _Scope, spec: Any, module_name: str, parts: list[str]) -> str | None:
    names, classes, dynamic = scope
    if dynamic:
        return None
    first = parts[0]
    if first not in names:
        if spec.submodule_search_locations and _has_submodule(spec, first):
            return None  # `pkg:sub` works once something imported pkg.sub: cannot tell
        return f"{module_name!r} has no attribute {first!r}{_guess(first, names)}"
    body = classes.get(first)
    where = f"{module_name}.{first}"
    for part in parts[1:]:
        if body is None:
            return None  # not a class defined here: its attributes are not in this source
        inner, inner_classes, inner_dynamic = _top_level(body)
        if inner_dynamic or part in inner:
            body = inner_classes.get(part)
            where = f"{where}.{part}"
            continue
        return f"{where!r} has no attribute {part!r}{_guess(part, inner)}"
    return None


def _top_level(body: list[ast.stmt]) -> _Scope:
    """Names one scope binds: ``(names, class bodies by name, may bind names dynamically)``.

    Descends into ``if`` / ``try`` / ``with`` / loop bodies (they run at this level), never
    into function or class bodies; ``global X`` inside a function binds ``X`` here too.
    """
    scope = _ScopeNames()
    scope.visit(body)
    return scope.names, scope.classes, scope.dynamic


class _ScopeNames:
    """What :func:`_top_level` collects while it walks one scope's statements."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.classes: dict[str, list[ast.stmt]] = {}
        self.dynamic = False

    def visit(self, stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.definition(node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    self.dynamic |= alias.name == "*"
                    self.names.add(alias.asname or alias.name.split(".")[0])
            else:
                for child in ast.iter_child_nodes(node):
                    self.child(child)

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.names.add(node.name)
        self.dynamic |= node.name == "__getattr__"
        if isinstance(node, ast.ClassDef):
            self.classes[node.name] = node.body
        for sub in ast.walk(node):
            if isinstance(sub, ast.Global):
                self.names.update(sub.names)

    def child(self, child: ast.AST) -> None:
        if isinstance(child, ast.stmt):
            self.visit([child])
        elif isinstance(child, ast.ExceptHandler):
            if child.name:
                self.names.add(child.name)
            self.visit(child.body)
        elif isinstance(child, ast.match_case):
            self.expression(child.pattern)
            self.visit(child.body)
        else:
            self.expression(child)

    def expression(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if isinstance(sub.ctx, ast.Store):
                    self.names.add(sub.id)
                self.dynamic |= sub.id in _DYNAMIC
            elif isinstance(sub, ast.MatchAs | ast.MatchStar) and sub.name:
                self.names.add(sub.name)


def _has_submodule(spec: Any, name: str) -> bool:
    for location in spec.submodule_search_locations or ():
        base = Path(location) / name
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return False


def _guess(word: str, candidates: Any) -> str:
    public = [c for c in candidates if not c.startswith("_")]
    close = difflib.get_close_matches(word, public, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _sibling_guess(module_name: str) -> str:
    """A did-you-mean among the modules next to a missing one (its parent imports fine)."""
    parent, _, leaf = module_name.rpartition(".")
    if not parent:
        return ""
    try:
        spec = importlib.util.find_spec(parent)
    except Exception:  # noqa: BLE001 -- the parent is broken: nothing to suggest
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    siblings = {
        p.stem if p.suffix == ".py" else p.name
        for loc in spec.submodule_search_locations
        for p in Path(loc).iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    close = difflib.get_close_matches(leaf, sorted(siblings), n=1, cutoff=0.6)
    return f" (did you mean {parent + '.' + close[0]!r}?)" if close else ""
