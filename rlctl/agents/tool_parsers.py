"""Tool-call parsers (the ``tool_parser`` plugin kind): calls out of a turn, results back in.

A parser target is ``target(tokenizer) -> ToolParser`` with:

* ``stop_token_ids`` - tokens that end a turn after a call (besides eos), kept in the turn;
* ``parse(text, tool_names) -> (content, [ToolCall])`` - the calls of one generated turn;
* ``render_results(results) -> [token ids]`` - the observation that answers them.

``hermes``: chat models (Qwen, Hermes...) write ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` and end the turn with eos; results go back as ``tool`` messages through the
chat template. ``compact``: for the tiny character-level model - the turn's text before
``#`` is the argument of the one tool offered, and the result comes back as its characters,
e.g. ``7#`` -> ``5`` (no delimiter: the model's next turn starts right after it, and a
random-init model with tied embeddings already tends to repeat the token it just read).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from rlctl.agents.observation import chat_delta_ids, has_chat_template, text_ids
from rlctl.agents.tools import ToolCall, ToolResult

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class HermesToolParser:
    """``<tool_call>{json}</tool_call>`` blocks (see the module docstring)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.stop_token_ids: tuple[int, ...] = ()  # chat models end a tool-call turn with eos

    def parse(self, text: str, tool_names: Sequence[str]) -> tuple[str, list[ToolCall]]:
        calls: list[ToolCall] = []
        for block in _HERMES.findall(text):
            try:
                data = json.loads(block)
                name, args = data["name"], data.get("arguments", {})
                if isinstance(args, str):  # some models double-encode the arguments
                    args = json.loads(args)
                if not isinstance(name, str) or not isinstance(args, dict):
                    raise TypeError("name must be a string and arguments an object")
                calls.append(ToolCall(name, args))
            except (ValueError, KeyError, TypeError) as exc:
                calls.append(
                    ToolCall("?", {}, error=f"unreadable tool call {block[:200]!r}: {exc}")
                )
        content = _HERMES.sub("", text).strip()
        return content, calls

    def render_results(self, results: Sequence[ToolResult]) -> list[int]:
        if has_chat_template(self.tokenizer):
            return chat_delta_ids(
                self.tokenizer, [{"role": "tool", "content": r.text} for r in results]
            )
        body = "".join(f"\n<tool_response>\n{r.text}\n</tool_response>" for r in results)
        return text_ids(self.tokenizer, body + "\n")


class CompactToolParser:
    """``ARGS#`` calls the one tool offered; its result comes back as its characters."""

    CALL_END = "#"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        ids = text_ids(tokenizer, self.CALL_END)
        if len(ids) != 1:
            raise ValueError(
                f"the compact tool-call format needs {self.CALL_END!r} to be one "
                f'token of the tokenizer, got {ids}; use tool_parser = "hermes"'
            )
        self.stop_token_ids = (ids[0],)

    def parse(self, text: str, tool_names: Sequence[str]) -> tuple[str, list[ToolCall]]:
        if self.CALL_END not in text:
            return text, []
        if len(tool_names) != 1:
            raise ValueError(
                f"the compact tool-call format calls the one tool offered, but "
                f"{len(tool_names)} are ({', '.join(tool_names)}); offer one tool "
                'or use tool_parser = "hermes"'
            )
        args = text.split(self.CALL_END, 1)[0].strip()
        return "", [ToolCall(tool_names[0], {"input": args} if args else {})]

    def render_results(self, results: Sequence[ToolResult]) -> list[int]:
        # A failed call reads "?": error texts would be mostly unknown characters here.
        return text_ids(self.tokenizer, "".join(r.text if r.ok else "?" for r in results))
