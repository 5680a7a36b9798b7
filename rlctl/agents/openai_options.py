"""Options of the ``openai_agent`` loop (kept apart so the CLI can read them without aiohttp)."""

from __future__ import annotations

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt

from rlctl.config.strict import STRICT_CONFIG


class OpenAIAgentOptions(BaseModel):
    """Options of the ``openai_agent`` agent loop (``[rollout] agent_loop_options``)."""

    model_config = STRICT_CONFIG

    agent: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """The episode function, ``"package.module:function"``: ``async def agent(client, record)``
    with ``client`` an ``openai.AsyncOpenAI`` bound to this episode's gateway session."""
    max_turns: PositiveInt = 16
    """Most chat completions per episode; the next one is refused (HTTP 400)."""
    max_total_tokens: PositiveInt = 8192
    """Most response tokens (generated + rendered messages) per output."""
    episode_timeout_s: PositiveFloat = 600.0
    """Seconds one episode (the agent function) may take before the session fails."""
    model_name: str = "policy"
    """The model name the gateway answers to (``client.chat.completions.create(model=...)``)."""
