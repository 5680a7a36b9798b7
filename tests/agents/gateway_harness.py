"""A gateway on a scripted chat policy, for the gateway tests: raw HTTP and the openai client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import openai

from rlctl.agents.gateway import Gateway
from rlctl.agents.gateway_session import GatewaySession
from rlctl.engines.rollout.contract import SamplingParams
from rlctl.models.tiny_chat import build_chat_tokenizer
from rlctl.testing.agent_episode import ScriptedChatPolicy
from tests.agents.agent_helpers import chat_policy

TOK = build_chat_tokenizer()
USER = [{"role": "user", "content": "what is 2+3?"}]
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                    "b": {"type": "integer"}}}}}


@dataclass
class Harness:
    """One running gateway with one open session."""

    gateway: Gateway
    session: GatewaySession
    policy: ScriptedChatPolicy
    http: aiohttp.ClientSession
    client: openai.AsyncOpenAI

    async def post(self, path: str, body: Any, *, raw: bytes | None = None,
                   key: str | None = None) -> tuple[int, Any]:
        """(status, JSON body) of ``POST /v1/<path>``."""
        headers = {"Authorization": f"Bearer {key or self.session.key}",
                   "Content-Type": "application/json"}
        data = raw if raw is not None else None
        async with self.http.post(f"{self.gateway.base_url}/{path}", json=None if raw else body,
                                  data=data, headers=headers) as reply:
            return reply.status, await reply.json(content_type=None)

    async def chat(self, messages: list[dict[str, Any]], **kw: Any) -> Any:
        return await self.client.chat.completions.create(model="policy", messages=messages, **kw)

    def other_session(self) -> GatewaySession:
        return self.gateway.open(SamplingParams(160), max_turns=8, max_total_tokens=800)


def run(scenario: Callable[[Harness], Awaitable[Any]], *, reply: Any = None,
        max_new_tokens: int = 160, max_total_tokens: int = 800, max_positions: int = 1024,
        json_schema: bool = False, max_turns: int = 8) -> Any:
    """Start a gateway on a scripted chat policy, run ``scenario(harness)``, stop it."""

    async def main() -> Any:
        policy = chat_policy(TOK) if reply is None else chat_policy(TOK, reply)
        gateway = Gateway(TOK, policy, max_positions=max_positions, json_schema=json_schema)
        await gateway.start()
        session = gateway.open(SamplingParams(max_new_tokens), max_turns=max_turns,
                               max_total_tokens=max_total_tokens)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=session.key,
                                    max_retries=0)
        try:
            async with aiohttp.ClientSession() as http:
                return await scenario(Harness(gateway, session, policy, http, client))
        finally:
            await client.close()
            await gateway.stop()

    return asyncio.run(main())
