"""The plugin registry: loads built-in and third-party plugins and holds what they register.

Built-ins (``rlctl.plugins.*``) and third-party packages (entry-point group ``rlctl``)
go through the same hooks. External loading is controlled by ``RLCTL_PLUGINS``:

* unset or ``auto``: load every entry point of group ``rlctl``;
* ``none``: load no external plugin;
* ``a,b``: load only the entry points named ``a`` and ``b``.

A plugin that fails to import or register is recorded in :attr:`Registry.failures` and
never breaks the CLI. Registration is all or nothing per plugin: one that raises half-way, or
claims a name another plugin holds, registers nothing (see :meth:`Registry._admit`).
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from rlctl import hookspecs, registry_targets

ENTRY_POINT_GROUP = "rlctl"
PLUGINS_ENV = "RLCTL_PLUGINS"

# kind -> registration hook name; each kind is declared once, on its hook (hookspecs).
KINDS: dict[str, str] = {k.name: k.hook for k in hookspecs.PLUGIN_KINDS.values()}

# Built-in plugin modules, registered exactly like third-party ones: one per kind, then the
# modules that add commands or checks only.
BUILTIN_MODULES: tuple[str, ...] = (
    *(k.builtin for k in hookspecs.PLUGIN_KINDS.values()),
    "rlctl.cli.bench_cmd",
    "rlctl.cli.engines_cmd",
    "rlctl.cli.eval_cmd",
    "rlctl.cli.models_cmd",
    "rlctl.cli.runs_cmd",
    "rlctl.plugins.trainer_checks",
)


class RegistryError(Exception):
    """A registration conflict or lookup failure."""


class TargetError(RegistryError, ImportError):
    """A registration's lazy ``module:attr`` target does not import; names plugin and name."""


@dataclass(frozen=True)
class PluginInfo:
    """Where a plugin came from."""

    name: str
    module: str
    distribution: str
    version: str
    builtin: bool

    def describe(self) -> str:
        """Who to blame, in words: ``plugin shout (entry point `shout = pkg.plugin` of ...)``."""
        if self.builtin:
            return f"built-in plugin {self.name}"
        if self.distribution == IN_PROCESS:
            return f"in-process plugin {self.name}"
        return (f"plugin {self.name} (entry point `{self.name} = {self.module}` of "
                f"{self.distribution} {self.version})")


IN_PROCESS = "(in-process)"  # PluginInfo.distribution of plugins passed as build_registry(extra=)


@dataclass
class Registration:
    """One named thing a plugin registered."""

    kind: str
    name: str
    target: Any  # callable, class, or lazy "module:attr" string
    plugin: PluginInfo
    options: type | None = None
    description: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``reward function "shout" of plugin shout (entry point ...)`` for messages."""
        return f'{self.kind.replace("_", " ")} "{self.name}" of {self.plugin.describe()}'

    def load(self) -> Any:
        """Resolve the implementation, importing a lazy ``module:attr`` target.

        A target that does not import raises :class:`TargetError` naming the plugin, the
        kind, the name and the target (``rlctl plugins list --check`` finds these early).
        """
        if isinstance(self.target, str):
            try:
                return registry_targets.resolve(self.target)
            except Exception as exc:
                raise TargetError(
                    f"{self.describe()}: its target {self.target!r} does not load: "
                    f"{registry_targets.load_failure(exc, caller=__file__)}; fix the target or "
                    "the module in the plugin (`rlctl plugins list --check` checks every target)"
                ) from exc
        return self.target

    def target_problem(self) -> str | None:
        """Why the target will not load, found without importing it (``None``: fine)."""
        return registry_targets.static_problem(self.target)


@dataclass(frozen=True)
class HookOutcome:
    """What one plugin's implementation of a hook returned, or the exception it raised."""

    plugin: str
    hook: str
    result: Any = None
    error: Exception | None = None

    def describe(self) -> str:
        """``plugin X: hook raised Type: message (at file:line)`` for a failed call."""
        return f"plugin {self.plugin}: {self.hook} raised {_describe(self.error)}" \
            if self.error is not None else f"plugin {self.plugin}: {self.hook} returned"


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded or registered."""

    name: str
    source: str
    error: str
    provides: tuple[tuple[str, str], ...] = ()
    """``(kind, name)`` it registered before it was refused (all of them, for a name clash):
    a recipe that selects one is told this plugin failed. Empty when its module did not
    import (nothing is known of it then)."""


class Registry:
    """All registrations of all loaded plugins, by kind and name."""

    def __init__(self, pm: pluggy.PluginManager, plugins: list[PluginInfo]) -> None:
        self.pm = pm
        self._plugins = plugins
        self._failures: list[PluginFailure] = []
        self._by_kind: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        # Registration hooks run on the first query, not at build time: they import the
        # option models (pydantic), which `rlctl --help` (it only needs `pm`) must not pay for.
        self._pending: dict[str, PluginInfo] | None = None

    @property
    def plugins(self) -> list[PluginInfo]:
        """The plugins that loaded and were not refused (after collecting)."""
        self.ensure_collected()
        return self._plugins

    @property
    def failures(self) -> list[PluginFailure]:
        """Plugins that failed to load, register or add commands (after collecting)."""
        self.ensure_collected()
        return self._failures

    def record_failure(self, failure: PluginFailure) -> None:
        """Add a failure without running the registration hooks (the CLI's command hooks)."""
        self._failures.append(failure)

    def ensure_collected(self) -> None:
        """Run the registration hooks now if they have not run yet (idempotent)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._collect(pending)

    # ----------------------------------------------------------------- queries
    def kinds(self) -> list[str]:
        return list(KINDS)

    def names(self, kind: str) -> list[str]:
        self.ensure_collected()
        return sorted(self._by_kind[kind])

    def all(self, kind: str) -> list[Registration]:
        return [self._by_kind[kind][n] for n in self.names(kind)]

    def find(self, kind: str, name: str) -> Registration | None:
        self.ensure_collected()
        return self._by_kind[kind].get(name)

    def failed_provider(self, kind: str, name: str) -> PluginFailure | None:
        """The failed plugin that registered ``kind`` ``name`` before it was refused."""
        return next((f for f in self.failures if (kind, name) in f.provides), None)

    def get(self, kind: str, name: str) -> Registration:
        reg = self.find(kind, name)
        if reg is None:
            known = ", ".join(self.names(kind)) or "none"
            raise RegistryError(
                f"no {kind.replace('_', ' ')} named {name!r} is registered "
                f"(registered: {known})"
            )
        return reg

    def load(self, kind: str, name: str) -> Any:
        return self.get(kind, name).load()

    def by_plugin(self, plugin_name: str) -> Iterator[Registration]:
        for kind in KINDS:
            for reg in self.all(kind):
                if reg.plugin.name == plugin_name:
                    yield reg

    # ----------------------------------------------------------------- calling hooks
    def call_each(
        self, hook: str, *, plugin: str | None = None, **kwargs: Any
    ) -> list[HookOutcome]:
        """Call every implementation of ``hook`` one plugin at a time, in registration order.

        Each call is isolated: an exception becomes the :attr:`HookOutcome.error` of that
        plugin and the next plugin is still called. ``plugin`` restricts the call to the one
        plugin of that name. ``kwargs`` are the hook's arguments; each implementation gets
        the ones it names (pluggy's rule: an implementation may take fewer).
        """
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        pending = self._pending
        if pending is not None and any(
            not (i.plugin_name in pending and pending[i.plugin_name].builtin) for i in impls
        ):
            # A third-party plugin may yet be refused (and unregistered) when the
            # registrations are collected; collect first so that a refused plugin's other
            # hooks do not run. Built-ins keep their names, so `rlctl --help` (built-in
            # command hooks only) does not pay for collecting.
            self.ensure_collected()
            impls = getattr(self.pm.hook, hook).get_hookimpls()
        outcomes = []
        for impl in impls:
            if plugin is not None and impl.plugin_name != plugin:
                continue
            try:
                result = impl.function(*[kwargs[name] for name in impl.argnames])
            except Exception as exc:  # noqa: BLE001 -- reported by the caller, with the plugin
                outcomes.append(HookOutcome(impl.plugin_name, hook, error=exc))
            else:
                outcomes.append(HookOutcome(impl.plugin_name, hook, result))
        return outcomes

    # ----------------------------------------------------------------- building
    def _collect(self, infos: dict[str, PluginInfo]) -> None:
        """Call every registration hook of every plugin, one plugin at a time.

        Calling per plugin (:meth:`call_each`, not ``pm.hook``) lets us attribute each
        registration to its plugin and isolate a plugin that raises.
        """
        staged_by_plugin: dict[str, list[Registration]] = {}
        for plugin_name, info in infos.items():
            if self.pm.get_plugin(plugin_name) is None:
                continue
            staged: list[Registration] = []
            try:
                for kind, hook_name in KINDS.items():
                    register = _make_register(kind, info, staged)
                    for outcome in self.call_each(hook_name, plugin=plugin_name, register=register):
                        if outcome.error is not None:
                            raise outcome.error  # one failed hook drops the whole plugin
            except Exception as exc:  # noqa: BLE001 -- a broken plugin must not break the CLI
                self._refuse(plugin_name, info, _describe(exc), staged)
                continue  # all or nothing: what it registered before raising is dropped
            staged_by_plugin[plugin_name] = staged
        self._admit(staged_by_plugin, infos)

    def _admit(
        self, staged: dict[str, list[Registration]], infos: dict[str, PluginInfo]
    ) -> None:
        """Add each plugin's registrations, all or nothing; a name claimed twice refuses.

        Who wins a name: a built-in always keeps its names, and the third-party plugin that
        claims one registers nothing. Between third-party plugins nobody wins: every plugin
        that claims the name registers nothing. Entry-point order depends on how packages
        were installed, so a winner would silently change what a recipe runs.
        """
        claims: dict[tuple[str, str], list[Registration]] = {}
        for regs in staged.values():
            for reg in regs:
                claims.setdefault((reg.kind, reg.name), []).append(reg)
        entry_points_loaded = [
            i.name for i in infos.values() if not i.builtin and i.distribution != IN_PROCESS
        ]
        refused: dict[str, list[str]] = {}
        for regs in claims.values():
            if len(regs) < 2:
                continue
            builtin_owners = {r.plugin.name for r in regs if r.plugin.builtin}
            for reg in regs:
                if reg.plugin.builtin and len(builtin_owners) == 1:
                    continue  # built-ins keep their names
                reasons = refused.setdefault(reg.plugin.name, [])
                reasons.append(_collision(reg, regs, entry_points_loaded))
        for plugin_name, regs in staged.items():
            if plugin_name in refused:
                info = infos[plugin_name]
                reasons = "; ".join(dict.fromkeys(refused[plugin_name]))
                self._refuse(plugin_name, info, f"{info.describe()} registers nothing: {reasons}",
                             regs)
                continue
            for reg in regs:
                self._by_kind[reg.kind][reg.name] = reg

    def _refuse(self, plugin_name: str, info: PluginInfo, error: str,
                staged: Sequence[Registration] = ()) -> None:
        """Record why a plugin is out, and take its other hooks (commands, lifecycle) out too."""
        provides = tuple(dict.fromkeys((r.kind, r.name) for r in staged))
        self._failures.append(PluginFailure(plugin_name, info.module, error, provides))
        self.pm.unregister(name=plugin_name)
        self._plugins = [p for p in self._plugins if p.name != plugin_name]


def _make_register(
    kind: str, info: PluginInfo, staged: list[Registration]
) -> Callable[..., None]:
    def register(
        name: str,
        target: Any,
        *,
        options: type | None = None,
        description: str = "",
        **metadata: Any,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{info.name}: {kind} names must be non-empty strings")
        if target is None:
            raise RegistryError(
                f"{info.name}: {kind} {name!r} has no target; register a callable, a class or "
                'a lazy "module:attr" string'
            )
        staged.append(
            Registration(kind, name, target, info, options, description, dict(metadata))
        )

    return register


def _collision(reg: Registration, claims: list[Registration], entry_points: list[str]) -> str:
    """Why ``reg``'s plugin is refused, and how to fix it."""
    what = f'{reg.kind.replace("_", " ")} "{reg.name}"'
    others = [c.plugin for c in claims if c.plugin.name != reg.plugin.name]
    if not others:
        return f"it registers {what} twice; register each name once"
    owner = next((p for p in others if p.builtin), None)
    if owner is not None and not reg.plugin.builtin:
        return (f"{what} is a built-in name (of {owner.describe()}), and built-ins keep their "
                f'names; fix: rename it in the plugin, e.g. "{reg.plugin.name}_{reg.name}"')
    also = ", ".join(dict.fromkeys(p.describe() for p in others))
    fix = "ask the authors of one plugin to rename it, or uninstall one"
    if reg.plugin.name in entry_points:
        keep = [n for n in entry_points if n != reg.plugin.name]
        fix += f"; to leave this one out: RLCTL_PLUGINS={','.join(keep) or 'none'}"
    return (f"{what} is also registered by {also}; a name that two plugins register goes to "
            f"neither (rlctl never picks a winner by install order); fix: {fix}")


def _hook_problem(message: str) -> str:
    """pluggy's ``unknown hook 'register_tool' in plugin ...`` with the hook meant."""
    import difflib
    import re

    unknown = re.match(r"unknown hook '([^']+)'", message)
    if unknown is None:
        return message
    hooks = [name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name),
                                                        f"{hookspecs.PROJECT}_spec")]
    close = difflib.get_close_matches(unknown.group(1), hooks, n=1, cutoff=0.6)
    fix = f"did you mean {close[0]!r}?" if close else f"the hooks are: {', '.join(sorted(hooks))}"
    return f"{message}: rlctl has no such hook ({fix}); the plugin registers nothing"


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _dist_of(module_name: str) -> tuple[str, str]:
    from importlib.metadata import packages_distributions, version

    top = module_name.split(".")[0]
    dists = packages_distributions().get(top, [])
    if not dists:
        return top, "unknown"
    try:
        return dists[0], version(dists[0])
    except Exception:  # noqa: BLE001 - a broken distribution's metadata only loses its version
        return dists[0], "unknown"


def build_registry(*, external: str | None = None, extra: Sequence[object] = ()) -> Registry:
    """Load built-ins and external plugins; their registrations are collected on the first
    query (``names``, ``find``, ``get``, ``failures``...), so building stays cheap.

    ``external`` overrides ``RLCTL_PLUGINS`` (``auto`` | ``none`` | comma list). ``extra``
    plugin objects (modules or instances with hookimpls) are registered too: tests and
    embedding applications use it to add plugins without packaging them.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    infos: dict[str, PluginInfo] = {}
    failures: list[PluginFailure] = []

    from rlctl import __version__

    for module_name in BUILTIN_MODULES:
        module = importlib.import_module(module_name)
        pm.register(module, name=module_name)
        infos[module_name] = PluginInfo(module_name, module_name, "rlctl", __version__, True)

    for plugin in extra:
        name = getattr(plugin, "__name__", type(plugin).__name__)
        pm.register(plugin, name=name)
        infos[name] = PluginInfo(name, name, IN_PROCESS, "unknown", False)

    mode = (external if external is not None else os.environ.get(PLUGINS_ENV, "auto")).strip()
    allow: set[str] | None = None
    if mode.lower() not in ("", "auto", "all"):
        allow = (
            set() if mode.lower() == "none" else {p.strip() for p in mode.split(",") if p.strip()}
        )
    if allow is None or allow:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if allow is not None and ep.name not in allow:
                continue
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
            except Exception as exc:  # noqa: BLE001 - one broken plugin is reported, not fatal
                failures.append(PluginFailure(ep.name, ep.value, _describe(exc)))
                continue
            dist = ep.dist
            infos[ep.name] = PluginInfo(
                ep.name,
                ep.value,
                dist.metadata["Name"] if dist is not None else _dist_of(ep.value)[0],
                dist.version if dist is not None else "unknown",
                False,
            )
    # A misspelt hookimpl name is an error, not a silent no-op: drop that plugin, record why.
    while True:
        try:
            pm.check_pending()
            break
        except pluggy.PluginValidationError as exc:
            bad = exc.plugin
            bad_name = str(pm.get_name(bad))
            info = infos.pop(bad_name, None)
            failures.append(PluginFailure(bad_name, info.module if info else "?",
                                          _hook_problem(str(exc))))
            pm.unregister(bad)

    registry = Registry(pm, list(infos.values()))
    registry._failures.extend(failures)
    registry._pending = infos
    return registry


_current: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry (built on first use)."""
    global _current
    if _current is None:
        _current = build_registry()
    return _current


def set_registry(registry: Registry | None) -> None:
    """Replace the process-wide registry (``None``: rebuild on next use). For tests and apps."""
    global _current
    _current = registry


def reset_registry() -> None:
    """Forget the cached registry (tests that install or disable plugins)."""
    set_registry(None)
