"""Faults fail loudly and never hang: agent-loop exceptions, reward crashes, engines missing."""

from __future__ import annotations

import inspect
import re
import sys
import types

import pytest

from rlctl.agents.contract import AgentLoop
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, set_registry
from rlctl.run.entry import train_from_recipe


class FlakyLoop(AgentLoop):
    """Session 1 of every prompt raises; the others answer normally."""

    def __init__(self, options=None):
        from rlctl.agents.single_turn import SingleTurnAgentLoop

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


def broken_estimator(token_level_rewards, response_mask, index, **_):
    return index.upper(), None  # index is a list of group ids


def shapeless_estimator(token_level_rewards, response_mask, index, **_):
    return token_level_rewards.sum(-1), None  # [B] instead of [B, T], and no returns


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

    @hookimpl
    def register_advantage_estimators(register):
        register("broken_estimator", broken_estimator, description="always raises",
                 requires=frozenset(), group_based=True)
        register("shapeless_estimator", shapeless_estimator, description="wrong outputs",
                 requires=frozenset(), group_based=True)

    module.register_agent_loops = register_agent_loops
    module.register_reward_functions = register_reward_functions
    module.register_advantage_estimators = register_advantage_estimators
    sys.modules[module.__name__] = module
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)
    del sys.modules[module.__name__]


def test_agent_loop_exception_becomes_a_failure_naming_uid_and_error(
    make_recipe, test_plugins, capsys
):
    code = train_from_recipe(make_recipe(rollout={"agent_loop": "flaky"}))
    err = capsys.readouterr().err
    assert code == 1
    assert "tool server unreachable" in err
    assert "failure" in err.lower()


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_reward_crash_names_plugin_kind_name_error_and_line(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(rewards=[{"name": "broken"}]))
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())  # the console may wrap long lines
    line = _line_of(broken_reward, "raise ValueError")
    assert (
        "training failed: WorkerError: rollout rank 0: generate failed: "
        'reward function "broken" of in-process plugin rlctl_test_fault_plugins raised '
        f"ValueError: reward model returned garbage at {__file__}:{line} in broken_reward "
        "while scoring sample "
    ) in err


def test_estimator_crash_names_plugin_kind_name_error_and_line(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(algorithm={"estimator": "broken_estimator"}))
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    line = _line_of(broken_estimator, "return")
    assert (
        "training failed: WorkerError: train rank 0: update_actor failed: "
        'advantage estimator "broken_estimator" of in-process plugin rlctl_test_fault_plugins '
        "raised AttributeError: 'list' object has no attribute 'upper' at "
        f"{__file__}:{line} in broken_estimator"
    ) in err


def test_estimator_with_wrong_outputs_is_named(make_recipe, test_plugins, capsys):
    code = train_from_recipe(make_recipe(algorithm={"estimator": "shapeless_estimator"}))
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert re.search(
        r'advantage estimator "shapeless_estimator" of in-process plugin '
        r"rlctl_test_fault_plugins returned \(Tensor\[32\], NoneType\); expected \(advantages, "
        r"returns\), two tensors shaped like response_mask \[32, \d+\]", err)


def test_a_failure_message_is_printed_verbatim_not_as_rich_markup(
    make_recipe, test_plugins, capsys
):
    code = train_from_recipe(make_recipe(rewards=[{"name": "markup"}]))
    err = capsys.readouterr().err
    assert code == 1
    assert MARKUP_MESSAGE in err and "MarkupError" not in err
