"""A turn's answer in OpenAI's formats: a chat completion or its chunks, a response or its
events (server-sent events: the turn is generated whole, then sent in order).

Every answer carries an ``rlctl`` extension with the turn's token ids and weight version
(clients ignore unknown fields).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from rlctl.agents.gateway_session import TurnResult


def _usage(result: TurnResult) -> dict[str, int]:
    done = len(result.token_ids)
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": done,
            "total_tokens": result.prompt_tokens + done}


def _extension(result: TurnResult) -> dict[str, Any]:
    return {"token_ids": result.token_ids, "weight_version": result.weight_version}


def _logprobs(result: TurnResult, texts: list[str]) -> list[dict[str, Any]]:
    return [{"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
            for t, lp in zip(texts, result.log_probs, strict=True)]


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event (``data: [DONE]`` for the string ``[DONE]``)."""
    body = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {body}\n\n".encode()


# ---------------------------------------------------------------------------- chat completions
def _calls(result: TurnResult) -> list[dict[str, Any]]:
    return [{"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in result.tool_calls]


def chat_completion(
    result: TurnResult, model: str, token_texts: list[str] | None
) -> dict[str, Any]:
    """The ``chat.completion`` object of one turn (``token_texts``: log-probs asked for)."""
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": result.finish_reason,
        "message": {"role": "assistant", "content": result.text,
                    "tool_calls": _calls(result) or None},
        "logprobs": None,
    }
    if token_texts is not None:
        choice["logprobs"] = {"content": _logprobs(result, token_texts)}
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(result),
        "rlctl": _extension(result),
    }


def chat_chunks(
    result: TurnResult, model: str, token_texts: list[str] | None, include_usage: bool
) -> Iterator[bytes]:
    """The turn as ``chat.completion.chunk`` events: the role, the text, each call, the
    finish reason, the usage (when asked), ``[DONE]``."""
    head = {"id": f"chatcmpl-{secrets.token_hex(8)}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        choice.update(extra)
        body = dict(head, choices=[choice])
        if include_usage:
            body["usage"] = None
        return sse(body)

    yield chunk({"role": "assistant", "content": ""})
    if result.text:
        extra = {"logprobs": {"content": _logprobs(result, token_texts)}} if token_texts else {}
        yield chunk({"content": result.text}, **extra)
    for i, call in enumerate(_calls(result)):
        yield chunk({"tool_calls": [dict(call, index=i)]})
    yield sse(dict(head, choices=[{"index": 0, "delta": {}, "logprobs": None,
                                   "finish_reason": result.finish_reason}],
                   rlctl=_extension(result), **({"usage": None} if include_usage else {})))
    if include_usage:
        yield sse(dict(head, choices=[], usage=_usage(result)))
    yield sse("[DONE]")


# ---------------------------------------------------------------------------- responses
def _output_items(result: TurnResult, token_texts: list[str] | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if result.text or not result.tool_calls:
        part = {"type": "output_text", "text": result.text, "annotations": [],
                "logprobs": _logprobs(result, token_texts) if token_texts else []}
        items.append({"id": f"msg_{secrets.token_hex(8)}", "type": "message",
                      "role": "assistant", "status": "completed", "content": [part]})
    for call in result.tool_calls:
        items.append({"id": f"fc_{secrets.token_hex(8)}", "type": "function_call",
                      "call_id": call["id"], "name": call["name"],
                      "arguments": call["arguments"], "status": "completed"})
    return items


def response_object(
    result: TurnResult, req: Any, model: str, token_texts: list[str] | None
) -> dict[str, Any]:
    """The ``response`` object of one turn; a reply cut by a token limit is ``incomplete``
    (``max_output_tokens``), as OpenAI answers it."""
    cut = result.finish_reason == "length"
    done = len(result.token_ids)
    fmt = req.text.format.model_dump(by_alias=True, exclude_none=True) if (
        req.text is not None and req.text.format is not None) else {"type": "text"}
    choice = req.tool_choice
    if isinstance(choice, BaseModel):
        choice = choice.model_dump()
    return {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "instructions": req.instructions,
        "output": _output_items(result, token_texts),
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "tool_choice": choice or "auto",
        "tools": [t.model_dump(exclude_none=True) for t in req.tools or []],
        "max_output_tokens": req.max_output_tokens,
        "previous_response_id": None,
        "reasoning": None,
        "store": False,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "text": {"format": fmt},
        "truncation": "disabled",
        "metadata": req.metadata or {},
        "usage": {"input_tokens": result.prompt_tokens,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": done,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": result.prompt_tokens + done},
        "rlctl": _extension(result),
    }


def response_events(response: dict[str, Any]) -> Iterator[bytes]:
    """The response as the Responses API's stream events, in order."""
    seq = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    start = dict(response, status="in_progress", output=[], incomplete_details=None,
                 usage=None)
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    for index, item in enumerate(response["output"]):
        yield from _item_events(event, index, item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    yield event(final, response=response)


def _item_events(event: Any, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    where = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "function_call":
        yield event("response.output_item.added", output_index=index,
                    item=dict(item, arguments="", status="in_progress"))
        yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
        yield event("response.function_call_arguments.done", **where, name=item["name"],
                    arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
        return
    part = item["content"][0]
    yield event("response.output_item.added", output_index=index,
                item=dict(item, status="in_progress", content=[]))
    empty = dict(part, text="", logprobs=[])
    yield event("response.content_part.added", **where, content_index=0, part=empty)
    if part["text"]:
        yield event("response.output_text.delta", **where, content_index=0,
                    delta=part["text"], logprobs=part["logprobs"])
    yield event("response.output_text.done", **where, content_index=0, text=part["text"],
                logprobs=part["logprobs"])
    yield event("response.content_part.done", **where, content_index=0, part=part)
    yield event("response.output_item.done", output_index=index, item=item)
