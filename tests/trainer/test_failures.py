"""Faults fail loudly and never hang: agent-loop exceptions, reward crashes, engines missing."""

from __future__ import annotations

import sys
import types

import pytest

from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, set_registry
from rlctl.trainer.controller.entry import train_from_recipe


class FlakyLoop:
    """Session 1 of every prompt raises; the others answer normally."""

    def __init__(self, options=None):
        from rlctl.trainer.worker.agent_loop import SingleTurnAgentLoop

        self.inner = SingleTurnAgentLoop()

    async def run(self, prompt, session_id, sampling, generate):
        if session_id == 1:
            raise RuntimeError("tool server unreachable")
        return await self.inner.run(prompt, session_id, sampling, generate)


def broken_reward(sample, **options):
    raise ValueError("reward model returned garbage")


MARKUP_MESSAGE = "no column 'answer' in [data] train = /tmp/a[/x]b/train.parquet"


def markup_reward(sample, **options):
    raise ValueError(MARKUP_MESSAGE)


@pytest.fixture
def test_plugins():
    module = types.ModuleType("rlctl_test_fault_plugins")

    @hookimpl
    def register_agent_loops(register):
        register("flaky", FlakyLoop, description="raises in session 1")

    @hookimpl
    def register_reward_functions(register):
        register("broken", broken_reward, description="always raises")
        register("markup", markup_reward, description="raises with rich markup in the text")

    module.register_agent_loops = register_agent_loops
    module.register_reward_functions = register_reward_functions
    sys.modules[module.__name__] = module
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)
    del sys.modules[module.__name__]


def test_agent_loop_exception_becomes_a_failure_naming_uid_and_error(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(rollout={"agent_loop": "flaky"}))
    err = capsys.readouterr().err
    assert code == 1
    assert "tool server unreachable" in err
    assert "failure" in err.lower()


def test_reward_crash_fails_the_step_with_the_error(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(rewards=[{"name": "broken"}]))
    assert code == 1
    assert "reward model returned garbage" in capsys.readouterr().err


def test_a_failure_message_is_printed_verbatim_not_as_rich_markup(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(rewards=[{"name": "markup"}]))
    err = capsys.readouterr().err
    assert code == 1
    assert MARKUP_MESSAGE in err and "MarkupError" not in err
