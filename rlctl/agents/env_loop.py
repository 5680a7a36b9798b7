"""The ``env`` agent loop: the model acts, a registered environment answers, until done.

Each turn's generated tokens are decoded (special tokens removed) into the action; the
environment's observation is rendered (``observation_format``) and appended as observation
tokens. The episode ends when the environment says ``done``, after ``max_turns`` actions, or
when ``max_total_tokens`` would be passed; the last observation is never appended.

Rewards: the sum of the step rewards is handed to reward functions as
``extra["env_reward"]`` (the ``env_reward`` reward function returns it). With
``reward = "per_step"`` each step's reward also sits on that step's last generated token
(``token_rewards``), which discounting estimators (GAE, REINFORCE++) see; with ``final``
the score sits on the last generated token.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, PositiveFloat, PositiveInt

from rlctl.agents.contract import AgentLoop, AgentLoopSpec, AgentOutput, GenerateFn, PromptRecord
from rlctl.agents.environment import StepResult, close_environment, maybe_await
from rlctl.agents.observation import has_chat_template, observation_ids, text_ids
from rlctl.agents.trajectory import Trajectory
from rlctl.config.strict import STRICT_CONFIG
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.plugin_errors import PluginCallError


def _shown(value: Any) -> str:
    """A value in an error message: its type, and its text cut short."""
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


class EnvLoopOptions(BaseModel):
    """Options of the ``env`` agent loop (``[rollout] agent_loop_options``)."""

    model_config = STRICT_CONFIG

    max_turns: PositiveInt = 8
    """Most actions (generation turns) per episode."""
    max_total_tokens: PositiveInt = 4096
    """Most response tokens (actions + observations) per episode."""
    step_timeout_s: PositiveFloat = 30.0
    """Seconds an async ``reset`` or ``step`` may take before the session fails."""
    reward: Literal["final", "per_step"] = "final"
    """``final``: the summed reward on the last generated token; ``per_step``: each step's
    reward on that step's last generated token."""
    observation_format: Literal["auto", "chat", "text"] = "auto"
    """``chat``: observations are user messages through the chat template; ``text``: their
    plain tokens; ``auto``: chat when the tokenizer has a template."""


class EnvAgentLoop(AgentLoop):
    """Multi-step episodes against a registered environment (see the module docstring)."""

    def __init__(self, spec: AgentLoopSpec) -> None:
        super().__init__(spec)
        self.options = spec.options_as(EnvLoopOptions)
        self.tokenizer = spec.tokenizer
        env = spec.environment
        if env is None:
            raise ValueError("the env agent loop needs an environment: add [rollout.environment]")
        self.env_options = env.options
        self.reg = spec.registry.get("environment", env.name)  # named in every error
        self.factory = self.reg.load()
        self.chat = self.options.observation_format == "chat" or (
            self.options.observation_format == "auto" and has_chat_template(self.tokenizer)
        )

    def _obs_ids(self, text: str) -> list[int]:
        return observation_ids(self.tokenizer, text, mode="chat" if self.chat else "text")

    async def _call(self, method: Any, *args: Any) -> Any:
        """``method(*args)`` of the environment, awaited within ``step_timeout_s``; what it
        raises names the environment, its plugin and the line that raised."""
        try:
            return await asyncio.wait_for(maybe_await(method(*args)), self.options.step_timeout_s)
        except TimeoutError:
            raise PluginCallError.contract(
                self.reg, f"{method.__name__} did not return within step_timeout_s = "
                f"{self.options.step_timeout_s:g} s", method) from None
        except Exception as exc:
            raise PluginCallError.from_exception(self.reg, exc, method) from exc

    async def _step(self, env: Any, action: str) -> StepResult:
        """One step's result; a value of the wrong shape names the environment's ``step``."""
        value = await self._call(env.step, action)
        try:
            return StepResult.of(value)
        except (TypeError, ValueError) as exc:
            raise PluginCallError.contract(self.reg, f"step returned {_shown(value)}: {exc}",
                                           env.step) from None

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        o = self.options
        env = self.factory(self.env_options)
        try:
            first = str(await self._call(env.reset, prompt) or "")
            if first and self.chat:
                raise ValueError(
                    "with a chat template the environment's reset must return "
                    '"" (put the first observation into the prompt)'
                )
            traj = Trajectory(
                list(prompt.prompt_ids) + (text_ids(self.tokenizer, first) if first else [])
            )
            total, done, info, steps = 0.0, False, {}, 0
            for turn in range(o.max_turns):
                budget = o.max_total_tokens - traj.response_tokens
                if budget <= 0:
                    break
                turn_sampling = replace(
                    sampling, max_new_tokens=min(sampling.max_new_tokens, budget)
                )
                traj.add_generation(await generate(traj.context, turn_sampling))
                action = self.tokenizer.decode(traj.last_turn_ids, skip_special_tokens=True)
                result = await self._step(env, action)
                steps += 1
                total += result.reward
                info = result.info
                if o.reward == "per_step":
                    traj.reward_last_turn(result.reward)
                if result.done or turn == o.max_turns - 1:
                    done = result.done
                    break
                obs = self._obs_ids(result.observation)
                if traj.response_tokens + len(obs) >= o.max_total_tokens:
                    break  # no room to act on it: end on the model's own turn
                traj.add_observation(obs)
        finally:
            await close_environment(env)
        out = traj.to_output(
            reward_ids=traj.last_turn_ids,
            per_token_rewards=o.reward == "per_step",
            extra={"env_reward": total, "env_done": done, "env_info": info, "env_steps": steps},
            metrics={"env_steps": float(steps), "env_done": float(done), "env_reward": total},
        )
        return [out]
