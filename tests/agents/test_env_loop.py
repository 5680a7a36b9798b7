"""The env agent loop: Gym-style episodes, observations as tokens, final or per-step rewards."""

from __future__ import annotations

import asyncio
import types

import pytest

from rlctl.agents.environment import StepResult
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.hookspecs import hookimpl
from rlctl.plugin_errors import PluginCallError
from rlctl.registry import build_registry, set_registry
from tests.agents.agent_helpers import ScriptedPolicy, build_loop, ids, recipe, record

GUESS = {"agent_loop": "env", "environment": {"name": "guess_digit"}}


def run(loop, policy, truth="6"):
    rec = record("?", {"ground_truth": truth})
    return asyncio.run(loop.run(rec, 0, SamplingParams(2), policy))


def test_guesses_and_feedback_interleave_and_the_episode_ends_when_found():
    loop = build_loop(recipe(**GUESS, agent_loop_options={"max_turns": 4}))
    [out] = run(loop, ScriptedPolicy(["5<eos>", "8<eos>", "6<eos>", "1<eos>"]))
    assert out.response_ids == ids("5<eos>+8<eos>-6<eos>")
    assert out.loss_mask == [1, 1, 0, 1, 1, 0, 1, 1]
    assert out.extra["env_reward"] == 1.0 and out.extra["env_done"] is True
    assert out.extra["env_steps"] == 3 and out.num_turns == 3
    assert out.token_rewards is None  # final reward: the score sits on the last generated token


def test_not_found_within_max_turns_scores_zero_and_ends_on_the_models_turn():
    loop = build_loop(recipe(**GUESS, agent_loop_options={"max_turns": 2}))
    [out] = run(loop, ScriptedPolicy(["5<eos>", "8<eos>"]))
    assert out.response_ids == ids("5<eos>+8<eos>") and out.extra["env_reward"] == 0.0
    assert out.extra["env_done"] is False


def test_an_invalid_action_ends_the_episode_by_default():
    loop = build_loop(recipe(**GUESS, agent_loop_options={"max_turns": 4}))
    [out] = run(loop, ScriptedPolicy(["x<eos>", "6<eos>"]))
    assert out.response_ids == ids("x<eos>") and out.extra["env_info"] == {"valid": False}


class _Shaped:
    """Async env: reward 0.25 per step, done after 3 steps."""

    def __init__(self, options):
        self.steps = 0
        self.closed = False

    async def reset(self, record):
        return "a"

    async def step(self, action):
        self.steps += 1
        return (f"{self.steps}", 0.25, self.steps == 3, {})


class _Hung(_Shaped):
    async def step(self, action):
        await asyncio.sleep(60)


class _FiveTuple(_Shaped):
    """gymnasium's (obs, reward, terminated, truncated, info): not what rlctl takes."""

    def step(self, action):
        return ("o", 1.0, False, False, {})


class _Raising(_Shaped):
    def step(self, action):
        return {"observation": "o"}["reward"]


@pytest.fixture
def odd_envs():
    module = types.ModuleType("rlctl_test_odd_envs")

    @hookimpl
    def register_environments(register):
        register("shaped", _Shaped)
        register("hung", _Hung)
        register("five_tuple", _FiveTuple)
        register("raising", _Raising)

    module.register_environments = register_environments
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)


def test_per_step_rewards_sit_on_each_steps_last_generated_token(odd_envs):
    r = recipe(
        agent_loop="env",
        environment={"name": "shaped"},
        agent_loop_options={"max_turns": 5, "reward": "per_step"},
    )
    [out] = run(build_loop(r), ScriptedPolicy(["1<eos>", "2<eos>", "3<eos>"]))
    # the reset observation "a" joins the prompt; the last observation is never appended
    assert out.prompt_ids[-1] == ids("a")[0]
    assert out.response_ids == ids("1<eos>1") + ids("2<eos>2") + ids("3<eos>")
    assert out.token_rewards == [0.0, 0.25, 0.0, 0.0, 0.25, 0.0, 0.0, 0.25]
    assert out.extra["env_reward"] == 0.75


def test_a_hung_environment_step_fails_the_session_within_its_timeout(odd_envs):
    r = recipe(
        agent_loop="env", environment={"name": "hung"}, agent_loop_options={"step_timeout_s": 0.2}
    )
    with pytest.raises(PluginCallError, match=r'environment "hung" of in-process plugin '
                       r"rlctl_test_odd_envs step did not return within step_timeout_s = 0.2 s"):
        run(build_loop(r), ScriptedPolicy(["1<eos>"]))


def test_a_step_of_the_wrong_shape_names_the_environment_its_plugin_and_line(odd_envs):
    r = recipe(agent_loop="env", environment={"name": "five_tuple"})
    with pytest.raises(PluginCallError) as failure:
        run(build_loop(r), ScriptedPolicy(["1<eos>"]))
    message = str(failure.value)
    assert message.startswith('environment "five_tuple" of in-process plugin rlctl_test_odd_envs '
                              "step returned tuple ('o', 1.0, False, False, {}): ")
    assert "4-tuple (observation, reward, done, info)" in message
    assert f"(defined at {__file__}:" in message and "_FiveTuple.step)" in message
    assert failure.value.plugin == "rlctl_test_odd_envs" and failure.value.location


def test_a_raising_step_names_the_environment_exception_and_line(odd_envs):
    r = recipe(agent_loop="env", environment={"name": "raising"})
    with pytest.raises(PluginCallError, match=r'environment "raising" of in-process plugin '
                       r"rlctl_test_odd_envs raised KeyError: 'reward' at .*test_env_loop.py:"):
        run(build_loop(r), ScriptedPolicy(["1<eos>"]))


def test_step_results_accept_gym_tuples_and_reject_other_values():
    assert StepResult.of(("o", 1, True, None)) == StepResult("o", 1.0, True, {})
    with pytest.raises(TypeError, match="4-tuple"):
        StepResult.of(("o", 1.0))
    with pytest.raises(TypeError, match="observation"):
        StepResult.of((None, 1.0, True, {}))
    with pytest.raises(TypeError, match="reward"):
        StepResult.of(("o", None, True, {}))
    with pytest.raises(ValueError, match="finite"):
        StepResult.of(("o", float("nan"), True, {}))
    with pytest.raises(TypeError, match="done"):
        StepResult.of(("o", 1.0, "yes", {}))
