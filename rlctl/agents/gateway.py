"""An OpenAI-compatible gateway in front of the rollout engine, one session per episode.

``POST /v1/chat/completions`` on 127.0.0.1 (an ephemeral port; never another interface). The
API key names the session: :meth:`Gateway.open` hands out a fresh random key per episode, and
a request with an unknown (or closed) key is refused with 401.

Token in, token out. The first request's messages are rendered with the chat template (and
its ``tools``) into the output's prompt. Each later request must repeat the conversation so
far - the earlier request's messages plus the assistant message the gateway answered - and
add new messages; only those are rendered (:func:`rlctl.agents.observation.chat_delta_ids`)
and appended after the engine's own tokens, so earlier turns are never re-tokenized. A
request whose history differs (the agent summarised or edited it) closes the current output
and starts a new one from a fresh rendering: many outputs per session.

Per turn the session records the engine's token ids, log-probs and weight version; the
sampling is the recipe's (a request's temperature / top_p are ignored, so the trainer's
log-probs match the sampler), and ``max_tokens`` only lowers the recipe's limit.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from rlctl.agents.contract import AgentOutput, GenerateFn
from rlctl.agents.observation import chat_delta_ids
from rlctl.agents.tool_parsers import HermesToolParser
from rlctl.agents.trajectory import Trajectory
from rlctl.engines.rollout.contract import SamplingParams

LOOPBACK = "127.0.0.1"


def _norm(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a message that change its rendering, in a canonical form."""
    out: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or ""}
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [_norm_call(c) for c in calls]
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _norm_call(call: dict[str, Any]) -> tuple[str, Any]:
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return fn.get("name"), args


def _template_message(message: dict[str, Any]) -> dict[str, Any]:
    """A request message as chat templates expect it (tool-call arguments as objects)."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {"type": "function", "function": {"name": n, "arguments": a}}
            for n, a in (_norm_call(c) for c in out["tool_calls"])
        ]
    return out


@dataclass
class GatewaySession:
    """One episode's conversation and its outputs."""

    key: str
    sampling: SamplingParams
    max_turns: int
    max_total_tokens: int
    history: list[dict[str, Any]] = field(default_factory=list)  # normalised, incl. our replies
    traj: Trajectory | None = None
    outputs: list[AgentOutput] = field(default_factory=list)
    turns: int = 0
    tools: list[dict[str, Any]] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def close_output(self) -> None:
        if self.traj is not None and self.traj.turns:
            self.outputs.append(self.traj.to_output(reward_ids=self.traj.last_turn_ids))
        self.traj = None


class GatewayError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class Gateway:
    """The HTTP server and its sessions (start and stop it on the worker's event loop)."""

    def __init__(self, tokenizer: Any, generate: GenerateFn, *, model_name: str = "policy") -> None:
        self.tokenizer = tokenizer
        self.generate = generate
        self.model_name = model_name
        self.parser = HermesToolParser(tokenizer)
        self.sessions: dict[str, GatewaySession] = {}
        self._runner: Any = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, 0)  # loopback only, an ephemeral port
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ sessions
    def open(
        self, sampling: SamplingParams, *, max_turns: int, max_total_tokens: int
    ) -> GatewaySession:
        key = secrets.token_urlsafe(24)
        session = GatewaySession(key, sampling, max_turns, max_total_tokens)
        self.sessions[key] = session
        return session

    def close(self, session: GatewaySession) -> list[AgentOutput]:
        """End the episode: its outputs, in order; the key is refused from now on."""
        self.sessions.pop(session.key, None)
        session.close_output()
        return session.outputs

    # ------------------------------------------------------------------ HTTP
    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        if self._session_of(request) is None:
            return self._error(
                GatewayError(
                    401,
                    "unknown session: use the API key of an open episode",
                    "authentication_error",
                )
            )
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": self.model_name, "object": "model", "created": 0, "owned_by": "rlctl"}
                ],
            }
        )

    def _session_of(self, request: Any) -> GatewaySession | None:
        auth = request.headers.get("Authorization", "")
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        return self.sessions.get(key)

    def _error(self, exc: GatewayError) -> Any:
        from aiohttp import web

        return web.json_response(
            {"error": {"message": str(exc), "type": exc.kind, "param": None, "code": None}},
            status=exc.status,
        )

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        session = self._session_of(request)
        try:
            if session is None:
                raise GatewayError(
                    401,
                    "unknown session: use the API key of an open episode",
                    "authentication_error",
                )
            try:
                body = await request.json()
            except ValueError as exc:
                raise GatewayError(400, f"the body is not JSON: {exc}") from exc
            if (
                not isinstance(body, dict)
                or not isinstance(body.get("messages"), list)
                or not body["messages"]
            ):
                raise GatewayError(400, "messages must be a non-empty list")
            if body.get("stream"):
                raise GatewayError(400, "stream=true is not supported by the rlctl gateway")
            if int(body.get("n") or 1) != 1:
                raise GatewayError(400, "n must be 1 (one completion per request)")
            async with session.lock:
                answer = await self._complete(session, body)
        except GatewayError as exc:
            return self._error(exc)
        return web.json_response(answer)

    # ------------------------------------------------------------------ one turn
    async def _complete(self, session: GatewaySession, body: dict[str, Any]) -> dict[str, Any]:
        if session.turns >= session.max_turns:
            raise GatewayError(
                400,
                f"this episode reached its turn limit ({session.max_turns} "
                "chat completions; agent_loop_options.max_turns)",
            )
        messages = [dict(m) for m in body["messages"]]
        tools = body.get("tools") or None
        self._extend(session, messages, tools)
        traj = session.traj
        assert traj is not None
        budget = session.max_total_tokens - traj.response_tokens
        limit = (
            body.get("max_completion_tokens")
            or body.get("max_tokens")
            or session.sampling.max_new_tokens
        )
        max_new = min(int(limit), session.sampling.max_new_tokens, budget)
        if max_new <= 0:
            session.turns += 1
            session.history = [_norm(m) for m in messages] + [
                _norm({"role": "assistant", "content": ""})
            ]
            version = traj.versions[-1] if traj.versions else 0
            return self._answer(session, "", [], "length", 0, [], [], version)
        gen = await self.generate(traj.context, replace(session.sampling, max_new_tokens=max_new))
        traj.add_generation(gen)
        session.turns += 1
        text = self.tokenizer.decode(traj.last_turn_ids, skip_special_tokens=False)
        calls = []
        if tools:
            text, parsed = self.parser.parse(text, [t["function"]["name"] for t in tools])
            calls = [c for c in parsed if c.error is None]
        for special in getattr(self.tokenizer, "all_special_tokens", []):
            text = text.replace(special, "")
        finish = "tool_calls" if calls else gen.finish_reason
        reply = {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": f"call_{session.turns}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for i, c in enumerate(calls)
            ]
            or None,
        }
        session.history = [_norm(m) for m in messages] + [_norm(reply)]
        return self._answer(
            session,
            text,
            reply["tool_calls"] or [],
            finish,
            len(gen.token_ids),
            list(gen.token_ids),
            list(gen.log_probs),
            gen.weight_version,
            logprobs=bool(body.get("logprobs")),
        )

    def _extend(
        self,
        session: GatewaySession,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
    ) -> None:
        """Append the request's new messages to the trajectory, or start a new output."""
        n = len(session.history)
        same = (
            session.traj is not None
            and len(messages) > n
            and [_norm(m) for m in messages[:n]] == session.history
            and tools == session.tools
        )
        if same:
            new = [_template_message(m) for m in messages[n:]]
            traj = session.traj
            assert traj is not None
            traj.add_observation(chat_delta_ids(self.tokenizer, new))
            return
        session.close_output()  # a different history: this output ends, a new one starts
        kwargs = {"tools": tools} if tools else {}
        ids = self.tokenizer.apply_chat_template(
            [_template_message(m) for m in messages],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
            **kwargs,
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        session.traj = Trajectory([int(t) for t in ids])
        session.tools = tools

    def _answer(
        self,
        session: GatewaySession,
        text: str,
        tool_calls: list[dict[str, Any]],
        finish: str,
        completion_tokens: int,
        token_ids: list[int],
        log_probs: list[float],
        version: int,
        *,
        logprobs: bool = False,
    ) -> dict[str, Any]:
        traj = session.traj
        assert traj is not None
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": finish,
            "message": {"role": "assistant", "content": text, "tool_calls": tool_calls or None},
            "logprobs": None,
        }
        if logprobs:
            choice["logprobs"] = {
                "content": [
                    {
                        "token": self.tokenizer.decode([t]),
                        "logprob": lp,
                        "bytes": None,
                        "top_logprobs": [],
                    }
                    for t, lp in zip(token_ids, log_probs)
                ]
            }
        prompt_tokens = len(traj.context) - completion_tokens
        return {
            "id": f"chatcmpl-{secrets.token_hex(8)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            # what the trainer will see for this turn (an extension; clients ignore it)
            "rlctl": {"token_ids": token_ids, "weight_version": version},
        }
