"""Options of the ``openai_agent`` loop (kept apart so the CLI can read them without aiohttp)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt

from rlctl.config.strict import STRICT_CONFIG


class OpenAIAgentOptions(BaseModel):
    """Options of the ``openai_agent`` agent loop (``[rollout] agent_loop_options``)."""

    model_config = STRICT_CONFIG

    agent: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """The episode function, ``"package.module:function"``: ``async def agent(client, record)``
    with ``client`` an ``openai.AsyncOpenAI`` bound to this episode's gateway session."""
    max_turns: PositiveInt = 16
    """Most requests (chat completions or responses) per episode; the next one is refused
    (HTTP 400)."""
    max_total_tokens: PositiveInt = 8192
    """Most response tokens (generated + rendered messages) per output."""
    episode_timeout_s: PositiveFloat = 600.0
    """Seconds one episode (the agent function) may take; past it the episode has failed
    (``on_episode_error`` says what follows)."""
    on_episode_error: Literal["score_zero", "fail"] = "score_zero"
    """An episode whose agent function raises (the framework's own turn limit, an unknown
    tool, unparseable output, a refused request) or runs past ``episode_timeout_s``:
    ``score_zero`` = its turns are kept and scored 0, the run goes on (counted as
    ``agent/episode_errors``, the first error of each step logged, each in the rollout dump);
    ``fail`` = the session fails, and with it the step."""
    model_name: str = "policy"
    """The model name the gateway lists (``GET /v1/models``); requests may name any model."""
