"""The ``openai_agent`` loop: a user function drives each episode through the gateway.

``agent_loop_options.agent = "package.module:function"`` names::

    async def agent(client: openai.AsyncOpenAI, record: AgentRecord) -> float | None

``client`` talks to this episode's session of the :class:`~rlctl.agents.gateway.Gateway`
(its API key is the session; chat completions and the Responses API, streaming or not);
``record`` has the prompt (``record.prompt``: the task's text or chat messages), its
``ground_truth`` and ``data_source``. Whatever the function returns that is a number becomes
``extra["agent_reward"]`` (the ``agent_reward`` reward function returns it); other reward
functions score the last completion. The gateway records every turn's token ids, log-probs
and weight version and the episode's outputs go to the data plane when the function returns.
An episode that raises or runs past ``episode_timeout_s`` is scored 0 (or fails its session:
``on_episode_error``).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

from rlctl.agents.contract import (
    AgentLoop,
    AgentLoopSpec,
    AgentOutput,
    EpisodeError,
    GenerateFn,
    PromptRecord,
)
from rlctl.agents.gateway import Gateway
from rlctl.agents.openai_options import OpenAIAgentOptions
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.registry_targets import resolve


@dataclass(frozen=True)
class AgentRecord:
    """What the agent function gets about its prompt."""

    uid: str
    session_id: int
    prompt: Any
    """The prompt as the task gave it: a string, or a list of chat messages."""
    ground_truth: Any
    data_source: str


def not_async_function(obj: Any) -> str | None:
    """Why ``obj`` cannot be an agent function (``None``: it is an async function)."""
    if inspect.iscoroutinefunction(obj):
        return None
    what = "a class" if inspect.isclass(obj) else (
        "a plain (not async) function" if callable(obj) else f"a {type(obj).__name__}")
    return f"it is {what}; write async def agent(client, record)"


def load_agent(path: str) -> Any:
    """The agent function ``"package.module:function"`` (a lazy target, like a plugin's;
    ``config validate`` checks it statically)."""
    obj = resolve(path)
    why = not_async_function(obj)
    if why is not None:
        raise TypeError(f"agent {path!r} must be an async function: {why}")
    return obj


def describe(exc: BaseException) -> str:
    """One line about an episode's failure."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return "the episode ran past agent_loop_options.episode_timeout_s"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}"


class OpenAIAgentLoop(AgentLoop):
    """Runs the user's agent function per session against one shared gateway."""

    def __init__(self, spec: AgentLoopSpec) -> None:
        super().__init__(spec)
        self.options = spec.options_as(OpenAIAgentOptions)
        self.tokenizer = spec.tokenizer
        self.agent = load_agent(self.options.agent)
        self.max_positions = spec.max_positions
        self.json_schema = spec.json_schema
        self._gateway: Gateway | None = None
        self._users = 0
        self._lock: asyncio.Lock | None = None
        self._loop: Any = None

    async def _acquire(self, generate: GenerateFn) -> Gateway:
        """The gateway of this event loop (each rollout call runs its own), started once."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new rollout call: the previous gateway is gone
            self._loop, self._lock, self._gateway, self._users = loop, asyncio.Lock(), None, 0
        assert self._lock is not None
        async with self._lock:
            if self._gateway is None:
                gateway = Gateway(self.tokenizer, generate, model_name=self.options.model_name,
                                  max_positions=self.max_positions, json_schema=self.json_schema)
                await gateway.start()
                self._gateway = gateway
            self._users += 1
            return self._gateway

    async def _release(self) -> None:
        assert self._lock is not None
        async with self._lock:
            self._users -= 1
            if self._users == 0 and self._gateway is not None:
                await self._gateway.stop()
                self._gateway = None

    async def run(
        self, prompt: PromptRecord, session_id: int, sampling: SamplingParams, generate: GenerateFn
    ) -> list[AgentOutput]:
        import openai

        o = self.options
        gateway = await self._acquire(generate)
        session = gateway.open(sampling, max_turns=o.max_turns, max_total_tokens=o.max_total_tokens)
        client = openai.AsyncOpenAI(
            base_url=gateway.base_url, api_key=session.key, max_retries=0,
            timeout=o.episode_timeout_s,
        )
        record = AgentRecord(
            prompt.uid, session_id, prompt.prompt, prompt.ground_truth, prompt.data_source
        )
        returned: Any = None
        error: Exception | None = None
        try:
            returned = await asyncio.wait_for(self.agent(client, record), o.episode_timeout_s)
        except Exception as exc:  # noqa: BLE001 - the policy below decides what follows
            error = exc
        finally:
            outputs = gateway.close(session)
            await client.close()
            await self._release()
        if error is None and not outputs:
            error = RuntimeError(f"agent {o.agent!r} finished without a chat completion")
        metrics = {
            "turns": float(sum(x.num_turns for x in outputs)),
            "outputs": float(len(outputs)),
            "episode_errors": float(error is not None),
            **session.counts,
        }
        if error is not None:
            if o.on_episode_error == "fail":
                raise error
            raise EpisodeError(describe(error), outputs, metrics)
        for out in outputs:
            if isinstance(returned, int | float) and not isinstance(returned, bool):
                out.extra["agent_reward"] = float(returned)
            out.metrics = dict(metrics)
        return outputs
