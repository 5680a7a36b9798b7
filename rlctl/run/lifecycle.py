"""Calling the plugins' lifecycle hooks (``on_train_start``, ``on_step_end``, ``on_train_end``).

Each plugin is called on its own (:meth:`rlctl.registry.Registry.call_each`), like every other
hook: a plugin whose hook raises is reported (a warning naming the plugin and the hook, with
the error and where it was raised) and the run goes on, as it does for a failing metric sink.
The same error from the same plugin's hook is reported once; :attr:`LifecycleHooks.failures`
keeps every one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlctl.registry import HookOutcome, Registry


class LifecycleHooks:
    """Report-and-continue calls of the lifecycle hooks of every plugin in ``registry``."""

    def __init__(self, registry: Registry, *, report: Callable[[str], None] | None = None) -> None:
        from rlctl.sinks.logger import report_to_stderr

        self.registry = registry
        self.report = report or report_to_stderr
        self.failures: list[HookOutcome] = []
        self._reported: set[tuple[str, str, str]] = set()

    def __call__(self, hook: str, **kwargs: Any) -> None:
        """Call ``hook`` of every plugin with ``kwargs``; report the plugins that raise."""
        for outcome in self.registry.call_each(hook, **kwargs):
            if outcome.error is None:
                continue
            self.failures.append(outcome)
            key = (outcome.plugin, hook, f"{type(outcome.error).__name__}: {outcome.error}")
            if key not in self._reported:
                self._reported.add(key)
                self.report(f"{outcome.describe()}; the run goes on "
                            "(repeats of this error are not shown)")
