"""A request of either route as one :class:`TurnRequest`, checked before any token is generated.

Both routes end up as chat messages for the same session: ``/v1/chat/completions`` as sent,
``/v1/responses`` by mapping its items (``instructions`` -> a system message, an assistant
``message`` item and the ``function_call`` items after it -> one assistant message with
``tool_calls``, ``function_call_output`` -> a ``tool`` message). Every check that can fail
runs here, so a bad request is an OpenAI-style JSON 400 naming the field (``param``) and
nothing is generated or recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rlctl.agents import gateway_schema as schema


class GatewayError(Exception):
    """An answer other than 200: the HTTP status and OpenAI's error ``type`` / ``param``."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param,
                          "code": None}}


@dataclass(frozen=True)
class TurnRequest:
    """One turn as the session runs it, whichever route it came by."""

    messages: list[dict[str, Any]]
    """Chat messages: ``role``, ``content`` (text), ``tool_calls`` (``[{"id", "type",
    "function": {"name", "arguments"}}]``, arguments as JSON text), ``tool_call_id``,
    ``name``."""
    tools: list[dict[str, Any]] | None
    """Chat-completions function tools (``[{"type": "function", "function": {...}}]``)."""
    tool_choice: str = "auto"
    """``auto``, ``none``, ``required`` or ``function`` (then :attr:`forced_name`)."""
    forced_name: str | None = None
    """The function a named ``tool_choice`` forces."""
    parallel_tool_calls: bool = True
    """``False``: the turn ends after its first call."""
    max_tokens: int | None = None
    """The request's own limit (lowers the recipe's)."""
    stop: tuple[str, ...] = ()
    """Strings that end the reply (not included)."""
    json_schema: str | None = None
    """The JSON schema the reply must follow (constrained decoding), as JSON text."""
    logprobs: bool = False
    """Report the generated tokens' log-probs."""

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools or []]


# ---------------------------------------------------------------------------- errors
_FIELD_NAMES = frozenset(
    info.alias or name
    for model in vars(schema).values()
    if isinstance(model, type) and issubclass(model, BaseModel)
    for name, info in model.model_fields.items()
)


def _param(loc: tuple[Any, ...]) -> str:
    """``("messages", 0, "content")`` -> ``messages[0].content`` (union branch names dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _FIELD_NAMES:
            out += f".{part}" if out else str(part)
    return out


def invalid(exc: ValidationError, model: type[BaseModel]) -> GatewayError:
    """The first validation error as a 400 that names the field and says why."""
    errors = exc.errors(include_url=False)
    # the deepest error says the most (of a union's branches, the one the value took)
    first = max(errors, key=lambda e: len(e["loc"]))
    loc = tuple(first["loc"])
    param = _param(loc)
    if first["type"] == "extra_forbidden" and loc:  # a field no model declares
        param = f"{_param(loc[:-1])}.{loc[-1]}".lstrip(".")
    top = model.model_fields.get(str(loc[0])) if loc else None
    extra = top.json_schema_extra if top is not None else None
    if isinstance(extra, dict) and extra.get("gateway") == "refused":
        message = f"{param}: " + " ".join((top.description or "refused").split())
    elif first["type"] == "extra_forbidden" and len(loc) == 1:
        message = (f"unrecognized request argument {loc[0]!r}: the gateway's fields and what "
                   "it does with each are listed in docs/agents.md")
    else:
        why = str(first["msg"]).removeprefix("Value error, ")
        message = f"{param or 'body'}: {why}"
    others = {_param(tuple(e["loc"])) for e in errors} - {param}
    if others:
        message += f" (and {len(others)} more field{'s' if len(others) > 1 else ''})"
    return GatewayError(400, message, param=param or None)


def _validated(model: type[BaseModel], body: Any) -> Any:
    if not isinstance(body, dict):
        raise GatewayError(400, "the body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid(exc, model) from None


# ---------------------------------------------------------------------------- chat completions
def _chat_message(m: schema.ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content or ""}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


def chat_turn(body: Any, *, json_schema_ok: bool) -> tuple[TurnRequest, Any]:
    """A ``/v1/chat/completions`` body -> the turn and the validated request."""
    req = _validated(schema.ChatCompletionsRequest, body)
    if req.n not in (None, 1):
        raise GatewayError(400, "n must be 1: one completion per request (a prompt's samples "
                                "are its sessions, [algorithm] group_size)", param="n")
    if req.top_logprobs:
        raise GatewayError(400, "top_logprobs must be 0: the rollout engine reports the "
                                "sampled token's log-prob only", param="top_logprobs")
    tools = [t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None
    choice = req.tool_choice
    named = choice.function.name if isinstance(choice, schema.NamedToolChoice) else None
    fmt = req.response_format
    schema_text = None
    if fmt is not None and fmt.type != "text":
        spec = fmt.json_schema.schema_ if fmt.type == "json_schema" and fmt.json_schema else None
        if fmt.type == "json_schema" and spec is None:
            raise GatewayError(400, "response_format json_schema needs json_schema.schema",
                               param="response_format.json_schema")
        schema_text = _json_format(spec, json_schema_ok, "response_format")
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    turn = TurnRequest(
        messages=[_chat_message(m) for m in req.messages],
        tools=tools,
        tool_choice="function" if named else (choice if isinstance(choice, str) else "auto"),
        forced_name=named,
        parallel_tool_calls=req.parallel_tool_calls is not False,
        max_tokens=req.max_completion_tokens or req.max_tokens,
        stop=tuple(s for s in stop if s),
        json_schema=schema_text,
        logprobs=bool(req.logprobs),
    )
    _check_tools(turn, "tool_choice")
    _check_call_ids(turn.messages, "messages", "tool_call_id")
    return turn, req


def _json_format(spec: dict[str, Any] | None, supported: bool, param: str) -> str:
    if not supported:
        raise GatewayError(
            400,
            f"{param}: a JSON answer needs constrained decoding, which this rollout engine "
            'does not do; use [engines.rollout] backend = "vllm", or ask for JSON in the '
            "prompt and parse the text",
            param=param,
        )
    return json.dumps(spec if spec is not None else {"type": "object"})


def _check_tools(turn: TurnRequest, param: str) -> None:
    if turn.tool_choice in ("required", "function") and not turn.tools:
        raise GatewayError(400, f"tool_choice {turn.tool_choice!r} needs tools", param=param)
    if turn.forced_name is not None and turn.forced_name not in turn.tool_names:
        raise GatewayError(
            400,
            f"tool_choice names {turn.forced_name!r}, which is not among the tools "
            f"({', '.join(turn.tool_names)})",
            param=param,
        )


def _check_call_ids(messages: list[dict[str, Any]], where: str, key: str) -> None:
    """Every tool message answers a call of an earlier assistant message (as OpenAI checks)."""
    seen: set[str] = set()
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            seen.add(call["id"])
        if m["role"] == "tool" and m["tool_call_id"] not in seen:
            raise GatewayError(
                400,
                f"{where}[{i}] answers tool call {m['tool_call_id']!r}, which no earlier "
                "assistant message made (use the id of the call it answers)",
                param=f"{where}[{i}].{key}",
            )


# ---------------------------------------------------------------------------- responses
def responses_turn(body: Any, *, json_schema_ok: bool) -> tuple[TurnRequest, Any]:
    """A ``/v1/responses`` body -> the turn (its items mapped onto chat messages) and the
    validated request."""
    req = _validated(schema.ResponsesRequest, body)
    tools = None
    if req.tools:
        tools = [{"type": "function", "function": t.model_dump(exclude_none=True,
                                                               exclude={"type"})}
                 for t in req.tools]
    choice = req.tool_choice
    named = choice.name if isinstance(choice, schema.ResponsesNamedChoice) else None
    fmt = req.text.format if req.text is not None else None
    schema_text = None
    if fmt is not None and fmt.type != "text":
        if fmt.type == "json_schema" and fmt.schema_ is None:
            raise GatewayError(400, "text.format json_schema needs a schema",
                               param="text.format")
        schema_text = _json_format(fmt.schema_, json_schema_ok, "text.format")
    messages = responses_messages(req)
    turn = TurnRequest(
        messages=messages,
        tools=tools,
        tool_choice="function" if named else (choice if isinstance(choice, str) else "auto"),
        forced_name=named,
        parallel_tool_calls=req.parallel_tool_calls is not False,
        max_tokens=req.max_output_tokens,
        json_schema=schema_text,
        logprobs="message.output_text.logprobs" in (req.include or ()),
    )
    _check_tools(turn, "tool_choice")
    _check_call_ids(messages, "input", "call_id")
    return turn, req


def responses_messages(req: Any) -> list[dict[str, Any]]:
    """The request's ``instructions`` and ``input`` as chat messages."""
    messages: list[dict[str, Any]] = []
    if req.instructions:
        messages.append({"role": "system", "content": req.instructions})
    if isinstance(req.input, str):
        messages.append({"role": "user", "content": req.input})
        return messages
    open_reply = False  # the last message is an assistant reply that calls may still join
    for item in req.input:
        if item.type == "function_call":
            if not open_reply:
                messages.append({"role": "assistant", "content": ""})
            reply = messages[-1]
            reply.setdefault("tool_calls", []).append(
                {"id": item.call_id, "type": "function",
                 "function": {"name": item.name, "arguments": item.arguments}})
            open_reply = True
        elif item.type == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.call_id,
                             "content": item.output or ""})
            open_reply = False
        elif item.role == "assistant" and open_reply and not messages[-1].get("tool_calls"):
            text = item.content or ""
            messages[-1]["content"] += ("\n" if messages[-1]["content"] else "") + text
        else:
            messages.append({"role": item.role, "content": item.content or ""})
            open_reply = item.role == "assistant"
    if not messages:
        raise GatewayError(400, "input is empty: send at least one message", param="input")
    return messages
