"""Calling hook implementations one plugin at a time, and the kind table every kind derives from."""

from __future__ import annotations

from rlctl.hookspecs import PLUGIN_KINDS, hookimpl
from rlctl.registry import BUILTIN_MODULES, KINDS, build_registry
from rlctl.run.lifecycle import LifecycleHooks


class _Recorder:
    """A lifecycle plugin that records the steps it saw."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    @hookimpl
    def on_step_end(self, step, metrics) -> None:  # type: ignore[no-untyped-def]
        self.steps.append(step)


class _RaisingOnStepEnd:
    """A lifecycle plugin whose dashboard is down: every on_step_end raises."""

    @hookimpl
    def on_step_end(self, step) -> None:  # type: ignore[no-untyped-def]  (takes fewer args)
        raise ConnectionError("dashboard unreachable")


def test_call_each_isolates_a_raising_plugin_and_calls_the_others() -> None:
    recorder = _Recorder()
    registry = build_registry(external="none", extra=[_RaisingOnStepEnd(), recorder])
    outcomes = registry.call_each("on_step_end", step=3, metrics={"x": 1.0})
    by_plugin = {o.plugin: o for o in outcomes}
    assert recorder.steps == [3]
    assert by_plugin["_Recorder"].error is None
    failed = by_plugin["_RaisingOnStepEnd"]
    assert isinstance(failed.error, ConnectionError)
    assert failed.describe().startswith(
        "plugin _RaisingOnStepEnd: on_step_end raised ConnectionError: dashboard unreachable"
    )
    assert "test_hook_calls.py:" in failed.describe()  # where it was raised
    only = registry.call_each("on_step_end", plugin="_Recorder", step=4, metrics={})
    assert [o.plugin for o in only] == ["_Recorder"] and recorder.steps == [3, 4]


def test_lifecycle_hooks_warn_once_per_error_and_go_on() -> None:
    recorder = _Recorder()
    reports: list[str] = []
    hooks = LifecycleHooks(
        build_registry(external="none", extra=[_RaisingOnStepEnd(), recorder]),
        report=reports.append,
    )
    for step in (1, 2, 3):
        hooks("on_step_end", step=step, metrics={})
    assert recorder.steps == [1, 2, 3]
    assert len(hooks.failures) == 3
    assert len(reports) == 1  # the same error again is counted, not shown
    assert "plugin _RaisingOnStepEnd: on_step_end raised ConnectionError" in reports[0]
    assert "the run goes on" in reports[0]


class _NoTarget:
    @hookimpl
    def register_tasks(self, register) -> None:  # type: ignore[no-untyped-def]
        register("fine", "rlctl.tasks.synthetic:count_digits")
        register("planned", None)


def test_a_registration_without_target_fails_its_whole_plugin() -> None:
    registry = build_registry(external="none", extra=[_NoTarget()])
    (failure,) = [f for f in registry.failures if f.name == "_NoTarget"]
    assert "task 'planned' has no target" in failure.error
    assert registry.find("task", "fine") is None  # all or nothing per plugin


def test_every_kind_is_declared_once_on_its_hook() -> None:
    from rlctl import hookspecs

    assert KINDS == {k.name: k.hook for k in PLUGIN_KINDS.values()}
    for kind in PLUGIN_KINDS.values():
        assert callable(getattr(hookspecs, kind.hook)), kind
        assert kind.builtin in BUILTIN_MODULES
    registry = build_registry(external="none")
    assert registry.kinds() == list(PLUGIN_KINDS)
    assert all(registry.names(kind) for kind in registry.kinds())  # built-ins fill every kind


class _RefusedWithAStepHook:
    """Claims a built-in name (so it is refused) and also has a lifecycle hook."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    @hookimpl
    def register_tasks(self, register) -> None:  # type: ignore[no-untyped-def]
        register("count_digits", "rlctl.tasks.synthetic:count_digits")

    @hookimpl
    def on_step_end(self, step) -> None:  # type: ignore[no-untyped-def]
        self.steps.append(step)


def test_registrations_are_collected_on_first_query_and_refusal_still_holds() -> None:
    refused = _RefusedWithAStepHook()
    registry = build_registry(external="none", extra=[refused])
    assert registry._pending is not None  # building ran no registration hook (cheap --help)
    # Calling a hook a third-party plugin implements collects first, so the refused plugin
    # is already out: its lifecycle hook never runs.
    outcomes = registry.call_each("on_step_end", step=1)
    assert registry._pending is None
    assert refused.steps == [] and "_RefusedWithAStepHook" not in {o.plugin for o in outcomes}
    assert any(f.name == "_RefusedWithAStepHook" for f in registry.failures)


def test_builtin_only_hooks_run_without_collecting() -> None:
    registry = build_registry(external="none")
    registry.call_each("register_commands", cli=None, plugin="rlctl.cli.nonexistent")
    assert registry._pending is not None
    assert "count_digits" in registry.names("task")  # the first query collects
    assert registry._pending is None
