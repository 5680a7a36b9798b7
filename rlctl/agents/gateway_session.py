"""One episode's conversation through the gateway: token in, token out, turn by turn.

The first request's messages are rendered with the chat template (and its ``tools``) into the
output's prompt. A later request that repeats the conversation so far - its messages, and the
gateway's replies as the framework re-sends them (:func:`same_reply`: whitespace, ``None`` /
``""``, a dropped ``<think>`` block and the formatting of tool-call arguments may differ) -
appends only its new messages, rendered as the chat template's delta
(:func:`rlctl.agents.observation.chat_delta_ids`) after the engine's own tokens; earlier turns
are never re-tokenized. A request whose history differs closes the output and starts a new one
from a fresh rendering.

A turn is a transaction: everything is planned, checked and generated first, and only a
generation that came back is recorded (a refused or failed request leaves the trajectory as it
was, so an agent's retry cannot append its messages twice).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from rlctl.agents.contract import AgentOutput, GenerateFn
from rlctl.agents.gateway_requests import GatewayError, TurnRequest
from rlctl.agents.gateway_schema import arguments_object
from rlctl.agents.observation import chat_delta_ids, turn_end_ids
from rlctl.agents.tool_parsers import HermesToolParser
from rlctl.agents.trajectory import Trajectory
from rlctl.engines.rollout.contract import Generation, SamplingParams, WeightSegment

# The hermes format (Qwen, Hermes): what a forced tool call's turn starts with.
CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "</tool_call>"
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass
class TurnResult:
    """One answered turn, whichever route asked."""

    text: str
    """The reply's content (tool-call blocks removed when calls were read)."""
    tool_calls: list[dict[str, str]]
    """``[{"id", "name", "arguments"}]`` (arguments as JSON text)."""
    finish_reason: str
    """``stop``, ``length`` or ``tool_calls``."""
    token_ids: list[int]
    """The engine's generated tokens of this turn."""
    log_probs: list[float]
    """Their log-probs."""
    weight_version: int
    """The policy version that generated them."""
    prompt_tokens: int
    """Tokens the engine read (prompt, earlier turns, observations)."""


@dataclass
class GatewaySession:
    """One episode's conversation and its outputs."""

    key: str
    sampling: SamplingParams
    max_turns: int
    max_total_tokens: int
    history: list[dict[str, Any]] = field(default_factory=list)
    """The conversation the current output holds, canonical (:func:`canonical`)."""
    replies: set[int] = field(default_factory=set)
    """Positions in :attr:`history` of the gateway's own replies (matched loosely)."""
    traj: Trajectory | None = None
    outputs: list[AgentOutput] = field(default_factory=list)
    turns: int = 0
    tools: list[dict[str, Any]] | None = None
    counts: dict[str, float] = field(
        default_factory=lambda: {"malformed_tool_calls": 0.0, "refused_requests": 0.0}
    )
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False

    def close_output(self) -> None:
        if self.traj is not None and self.traj.turns:
            self.outputs.append(self.traj.to_output(reward_ids=self.traj.last_turn_ids))
        self.traj = None
        self.history, self.replies = [], set()


# ---------------------------------------------------------------------------- canonical forms
def canonical(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a message that change its rendering, in one form (arguments parsed)."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [
            (c["function"]["name"], arguments_object(c["function"]["arguments"])) for c in calls
        ]
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _squash(text: str) -> str:
    return "".join(text.split())


def same_reply(sent: dict[str, Any], echoed: dict[str, Any]) -> bool:
    """Whether ``echoed`` (canonical) is the gateway's reply ``sent`` as a framework re-sends
    it: the same calls (arguments compared parsed), and the same text up to whitespace, with
    or without its ``<think>`` block (or no text at all beside calls)."""
    if echoed["role"] != "assistant" or echoed.get("tool_calls", []) != sent.get("tool_calls", []):
        return False
    ours, theirs = sent["content"], echoed["content"]
    if _squash(ours) == _squash(theirs):
        return True
    if _squash(_THINK.sub("", ours)) == _squash(_THINK.sub("", theirs)):
        return True
    return not theirs.strip() and bool(sent.get("tool_calls"))


# ---------------------------------------------------------------------------- rendering
class ChatRendering:
    """The chat template's side of the gateway: prompts, deltas, the end-of-turn tokens.

    Rendering runs on one thread of its own (a long conversation must not stall the event
    loop that serves every other episode; one thread, because a fast tokenizer must not be
    used from two threads at once).
    """

    def __init__(self, tokenizer: Any, max_positions: int | None) -> None:
        self.tokenizer = tokenizer
        self.max_positions = max_positions
        template = tokenizer.chat_template
        text = template if isinstance(template, str) else json.dumps(template)
        self.has_developer = "developer" in text
        self.turn_end = turn_end_ids(tokenizer)
        self.specials = [t for t in tokenizer.all_special_tokens if t]
        # no token is longer than this many characters: more characters than
        # positions x this cannot fit, whatever they tokenize to
        self.max_token_chars = max((len(t) for t in tokenizer.get_vocab()), default=1)
        self.parser = HermesToolParser(tokenizer)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rlctl-gateway-render")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def template_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Request messages as chat templates take them (arguments as objects, ``developer``
        as ``system`` where the template has no such role)."""
        out = []
        for m in messages:
            m = dict(m)
            if m["role"] == "developer" and not self.has_developer:
                m["role"] = "system"
            if m.get("tool_calls"):
                m["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["function"]["name"],
                                  "arguments": arguments_object(c["function"]["arguments"])}}
                    for c in m["tool_calls"]
                ]
            out.append(m)
        return out

    def prompt_ids(self, messages: list[dict[str, Any]], tools: Any) -> list[int]:
        kwargs = {"tools": tools} if tools else {}
        ids = self.tokenizer.apply_chat_template(
            self.template_messages(messages), tokenize=True, add_generation_prompt=True,
            return_dict=False, **kwargs,
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def delta_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        return chat_delta_ids(self.tokenizer, self.template_messages(messages))

    def text_ids(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        for special in self.specials:
            text = text.replace(special, "")
        return text

    def single_token(self, text: str) -> int | None:
        ids = self.text_ids(text)
        return ids[0] if len(ids) == 1 else None


# ---------------------------------------------------------------------------- stop strings
def cut_at_stop(chat: ChatRendering, ids: list[int], stops: tuple[str, ...]) -> int | None:
    """The number of tokens that first contain one of ``stops`` (``None``: none does)."""
    if not stops or not any(s in chat.decode(ids) for s in stops):
        return None
    lo, hi = 1, len(ids)  # the shortest prefix whose text contains a stop string
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in chat.decode(ids[:mid]) for s in stops):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _before_stop(text: str, stops: tuple[str, ...]) -> str:
    cuts = [text.find(s) for s in stops if s in text]
    return text[: min(cuts)] if cuts else text


def truncated(gen: Any, n: int) -> Generation:
    """``gen``'s first ``n`` tokens (the turn ended at a stop string there)."""
    spans = [WeightSegment(s.version, s.start, min(s.end, n))
             for s in gen.weight_segments() if s.start < n]
    return Generation(list(gen.token_ids[:n]), list(gen.log_probs[:n]), "stop",
                      gen.weight_version, segments=tuple(spans) if gen.segments else (),
                      aborts=gen.aborts, resumes=gen.resumes)


# ---------------------------------------------------------------------------- one turn
@dataclass
class _Plan:
    """What a turn will append, computed before anything is recorded."""

    new_output: bool
    prompt: list[int]  # the new output's prompt (empty when continuing)
    observation: list[int]  # tokens before the generation (mask 0)
    prefix: list[int]  # a forced call's opening (mask 0, part of the reply's text)
    context: list[int]  # what the engine reads


async def run_turn(
    session: GatewaySession, req: TurnRequest, chat: ChatRendering, generate: GenerateFn
) -> TurnResult:
    """Plan, generate, then record one turn (see the module docstring)."""
    if session.turns >= session.max_turns:
        raise GatewayError(400, f"this episode reached its turn limit ({session.max_turns} "
                                "requests; agent_loop_options.max_turns)")
    _check_size(req, chat)
    plan = await chat.run(_plan, session, req, chat)
    used = (session.traj.response_tokens if not plan.new_output and session.traj else 0)
    used += len(plan.observation) + len(plan.prefix)
    room = session.max_total_tokens - used
    if chat.max_positions is not None:
        if len(plan.context) >= chat.max_positions:
            raise GatewayError(
                400,
                f"the conversation is {len(plan.context)} tokens and the model takes "
                f"{chat.max_positions} positions: nothing is left to generate (shorten the "
                "messages or start a new conversation)",
                param="messages",
            )
        room = min(room, chat.max_positions - len(plan.context))
    max_new = min(req.max_tokens or session.sampling.max_new_tokens,
                  session.sampling.max_new_tokens, room)
    if max_new <= 0:  # this output's token budget is spent: it ends on the model's turn
        session.turns += 1
        session.close_output()
        return TurnResult("", [], "length", [], [], 0, len(plan.context))
    gen = await generate(plan.context, _sampling(session, req, chat, max_new))
    if session.closed:
        raise GatewayError(401, "the episode ended while this turn was generated",
                           "authentication_error")
    return _record(session, req, chat, plan, gen)


def _check_size(req: TurnRequest, chat: ChatRendering) -> None:
    """Refuse, before rendering, text that cannot fit the model's positions."""
    if chat.max_positions is None:
        return
    chars = sum(len(m["content"]) for m in req.messages) + len(json.dumps(req.tools or []))
    if chars > chat.max_positions * chat.max_token_chars:
        raise GatewayError(
            400,
            f"the messages are {chars} characters: more than the model's "
            f"{chat.max_positions} positions can hold; shorten them",
            param="messages",
        )


def _plan(session: GatewaySession, req: TurnRequest, chat: ChatRendering) -> _Plan:
    """Runs on the render thread: the tokens this turn adds (nothing is recorded yet)."""
    prefix: list[int] = []
    if req.tool_choice == "required":
        prefix = chat.text_ids(CALL_OPEN)
    elif req.tool_choice == "function":
        prefix = chat.text_ids(CALL_OPEN + '{"name": ' + json.dumps(req.forced_name)
                               + ', "arguments": ')
    traj = session.traj
    n = len(session.history)
    if traj is not None and n and len(req.messages) > n and req.tools == session.tools and all(
        same_reply(h, canonical(m)) if i in session.replies else h == canonical(m)
        for i, (h, m) in enumerate(zip(session.history, req.messages[:n], strict=True))
    ):
        obs = chat.delta_ids(req.messages[n:])
        if traj.last_turn_ids and traj.last_turn_ids[-1] not in chat.turn_end:
            obs = chat.turn_end + obs  # the cut turn ends as the template ends one
        return _Plan(False, [], obs, prefix, traj.context + obs + prefix)
    prompt = chat.prompt_ids(req.messages, req.tools)
    return _Plan(True, prompt, [], prefix, prompt + prefix)


def _sampling(
    session: GatewaySession, req: TurnRequest, chat: ChatRendering, max_new: int
) -> SamplingParams:
    stops = list(session.sampling.stop_token_ids)
    if req.tools and req.tool_choice != "none" and not req.parallel_tool_calls:
        close = chat.single_token(CALL_CLOSE)
        if close is not None:  # the turn ends with its first call
            stops.append(close)
    return replace(session.sampling, max_new_tokens=max_new,
                   stop_token_ids=tuple(dict.fromkeys(stops)), json_schema=req.json_schema)


def _record(
    session: GatewaySession, req: TurnRequest, chat: ChatRendering, plan: _Plan, gen: Any
) -> TurnResult:
    """The generation came back: record the turn and build the reply."""
    cut = cut_at_stop(chat, list(gen.token_ids), req.stop)
    if cut is not None:
        gen = truncated(gen, cut)
    if plan.new_output:
        session.close_output()
        session.traj = Trajectory(plan.prompt)
        session.tools = req.tools
    traj = session.traj
    assert traj is not None
    if plan.observation or plan.prefix:
        traj.add_observation(plan.observation + plan.prefix)
    traj.add_generation(gen)
    session.turns += 1
    generated = chat.decode(traj.last_turn_ids)
    if cut is not None:  # the reply ends before the stop string (the opening never does)
        generated = _before_stop(generated, req.stop)
    text = chat.decode(plan.prefix) + generated
    calls: list[dict[str, str]] = []
    if req.tools and req.tool_choice != "none":
        text, calls = _read_calls(session, chat, text, req.parallel_tool_calls)
    reply = {"role": "assistant", "content": text,
             "tool_calls": [{"id": c["id"], "type": "function",
                             "function": {"name": c["name"], "arguments": c["arguments"]}}
                            for c in calls]}
    session.history = [canonical(m) for m in req.messages] + [canonical(reply)]
    session.replies = (session.replies if not plan.new_output else set()) | {
        len(session.history) - 1}
    finish = "tool_calls" if calls else gen.finish_reason
    return TurnResult(text, calls, finish, list(gen.token_ids), list(gen.log_probs),
                      int(gen.weight_version), len(plan.context))


def _read_calls(
    session: GatewaySession, chat: ChatRendering, text: str, parallel: bool
) -> tuple[str, list[dict[str, str]]]:
    """The turn's tool calls; any malformed block leaves the whole text as the content (as
    vLLM's hermes parser does), counted in ``malformed_tool_calls``."""
    content, parsed = chat.parser.parse(text, [])
    if any(c.error is not None for c in parsed):
        session.counts["malformed_tool_calls"] += 1
        return text, []
    if not parallel:
        parsed = parsed[:1]
    calls = [{"id": f"call_{secrets.token_hex(8)}", "name": c.name,
              "arguments": json.dumps(c.arguments)} for c in parsed]
    return (content if calls else text), calls
