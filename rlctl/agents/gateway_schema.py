"""What the gateway accepts: the request bodies of its two routes, field by field.

Every field OpenAI documents for ``POST /v1/chat/completions`` and ``POST /v1/responses``
that agent frameworks send is declared here with what the gateway does with it:

* **honoured** - it changes the answer as OpenAI's would (``tool_choice``, ``stop``...);
* **ignored** - accepted and without effect, because the recipe decides it (sampling:
  ``temperature``, ``top_p``, penalties; the trainer's log-probs must match the sampler) or
  because it concerns OpenAI's service (``store``, ``metadata``, ``user``...);
* **refused** - an OpenAI-style JSON 400 before any token is generated (``n > 1``, audio,
  a stored ``previous_response_id``...).

A field that is not declared is refused too (``extra = "forbid"``), so nothing a client sends
is dropped without a word. ``docs/agents.md`` shows :func:`field_table` (a test keeps it
equal): ``python -m rlctl.agents.gateway_schema`` prints it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

Treatment = Literal["honoured", "ignored", "refused"]

_CONFIG = ConfigDict(
    extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
)


def _field(treatment: Treatment, default: Any = None, **kwargs: Any) -> Any:
    return Field(default, json_schema_extra={"gateway": treatment}, **kwargs)


def honoured(default: Any = None, **kwargs: Any) -> Any:
    return _field("honoured", default, **kwargs)


def ignored(default: Any = None, **kwargs: Any) -> Any:
    return _field("ignored", default, **kwargs)


def refused(default: Any = None, **kwargs: Any) -> Any:
    return _field("refused", default, **kwargs)


# ---------------------------------------------------------------------------- content
_TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def content_text(value: Any) -> str | None:
    """A message's content as one string: a string as is, a list of text parts joined with
    newlines (as vLLM joins them), ``None`` kept; any other part is refused."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        # ValueError, not TypeError: pydantic reports a ValueError as the field's error
        raise ValueError("content must be a string or a list of text parts")  # noqa: TRY004
    texts = []
    for i, part in enumerate(value):
        if isinstance(part, str):  # Responses function_call_output may list bare strings
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        key = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
        if key is None or not isinstance(part.get(key), str):
            raise ValueError(
                f"content part {i} is {kind!r}: the policy reads text only "
                '(parts {"type": "text", "text": ...})'
            )
        texts.append(part[key])
    return "\n".join(texts)


Content = Annotated[str | None, BeforeValidator(content_text)]
"""Message content, normalised to text or ``None`` (see :func:`content_text`)."""


class _Body(BaseModel):
    model_config = _CONFIG


def _function_only(kind: str) -> str:
    if kind != "function":
        raise ValueError(f"a {kind!r} tool is not served: the gateway serves function tools "
                         '(type = "function") that the agent runs itself')
    return kind


FunctionType = Annotated[str, AfterValidator(_function_only)]


# ---------------------------------------------------------------------------- chat completions
class FunctionCallIn(_Body):
    name: str
    """The function's name."""
    arguments: str
    """Its arguments, as the JSON text the gateway sent (any formatting)."""


class ToolCallIn(_Body):
    id: str
    """The call's id (``tool`` messages answer it)."""
    type: Literal["function"] = "function"
    """Only function calls exist."""
    function: FunctionCallIn
    """The call."""
    index: int | None = None
    """Streaming clients keep the chunk index; ignored."""


class ChatMessage(_Body):
    """One message of ``messages`` (every role in one model: errors point at the field)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    """Who speaks; ``developer`` is rendered as ``system`` when the chat template has no
    ``developer`` role."""
    content: Content = None
    """Text, or a list of text parts (joined); an assistant message's may be ``None``."""
    name: str | None = None
    """A participant name (passed to the chat template)."""
    tool_calls: list[ToolCallIn] | None = None
    """Assistant messages: the calls it made."""
    tool_call_id: str | None = None
    """Tool messages: the call answered (the id of a call of an earlier assistant message)."""
    refusal: str | None = None
    """Assistant messages: echoed refusal text (``None``; the policy never refuses)."""
    annotations: list[Any] | None = None
    """Assistant messages: echoed annotations (ignored)."""
    audio: None = None
    """Audio is refused (the policy reads text)."""
    function_call: None = None
    """The legacy ``function_call`` is refused: use ``tool_calls``."""
    reasoning_content: str | None = None
    """Reasoning text some clients echo separately (ignored: the gateway sends reasoning in
    ``content``)."""

    @model_validator(mode="after")
    def _by_role(self) -> ChatMessage:
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a {self.role} message needs content")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError(f"a {self.role} message has no tool_call_id")
        if self.role != "assistant" and self.tool_calls:
            raise ValueError(f"a {self.role} message has no tool_calls")
        return self


class FunctionDef(_Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    """The function's name."""
    description: str | None = None
    """What it does (rendered by the chat template)."""
    parameters: dict[str, Any] | None = None
    """A JSON schema of its arguments (rendered by the chat template)."""
    strict: bool | None = None
    """OpenAI's strict schema adherence; ignored (arguments are the model's own)."""


class ToolDef(_Body):
    type: FunctionType
    """Only function tools are served."""
    function: FunctionDef
    """The function."""


class NamedFunction(_Body):
    name: str
    """The function the model must call."""


class NamedToolChoice(_Body):
    type: Literal["function"]
    """Only functions can be named."""
    function: NamedFunction
    """Which one."""


class JsonSchemaFormat(_Body):
    name: str
    """The schema's name."""
    schema_: dict[str, Any] = Field(alias="schema")
    """The JSON schema the answer must follow."""
    description: str | None = None
    """What the format is for."""
    strict: bool | None = None
    """Whether to follow the schema strictly (a constraining engine always does)."""


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    """``text`` (the default), or a JSON answer (constrained decoding)."""
    json_schema: JsonSchemaFormat | None = None
    """With ``type = "json_schema"``: the schema."""


class StreamOptions(_Body):
    include_usage: bool | None = None
    """A last chunk with the token usage."""
    include_obfuscation: bool | None = None
    """OpenAI's padding of streamed chunks; ignored."""


Stop = str | list[str]
ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ChatCompletionsRequest(_Body):
    """The body of ``POST /v1/chat/completions``."""

    model: str | None = honoured()
    """Any name: the episode's policy answers (the API key names the session)."""
    messages: list[ChatMessage] = honoured(..., min_length=1)
    """The conversation; a later request repeats the earlier ones and the gateway's replies
    (matched by meaning: whitespace, ``None`` / ``""`` and argument formatting may differ)."""
    tools: list[ToolDef] | None = honoured()
    """Function tools, rendered into the prompt by the chat template; calls come back as
    ``tool_calls``."""
    tool_choice: ToolChoice | None = honoured()
    """``auto``; ``none`` (no calls are read: the text comes back as is); ``required`` and a
    named function start the model's turn with the call's opening (``<tool_call>``, and the
    name), recorded as observation tokens (loss mask 0)."""
    parallel_tool_calls: bool | None = honoured()
    """``false``: the turn ends after its first call."""
    max_tokens: int | None = honoured(ge=1)
    """Lowers the recipe's ``rollout.max_new_tokens`` for this turn (never raises it)."""
    max_completion_tokens: int | None = honoured(ge=1)
    """As ``max_tokens``."""
    stop: Stop | None = honoured()
    """A string or a list; the reply ends before the first one found (the tokens after it are
    dropped from the trajectory, never trained on)."""
    stream: bool | None = honoured()
    """Server-sent events in the chunk format (the turn is generated whole, then sent)."""
    stream_options: StreamOptions | None = honoured()
    """``include_usage``: a last chunk with the token counts."""
    logprobs: bool | None = honoured()
    """The engine's log-prob of each generated token."""
    top_logprobs: int | None = honoured(ge=0, le=20)
    """``0`` only: the engine reports the sampled token's log-prob, no alternatives (refused
    above 0)."""
    n: int | None = honoured(ge=1)
    """``1`` only (one completion per request; a group's samples are its sessions)."""
    response_format: ResponseFormat | None = honoured()
    """``text``; ``json_object`` / ``json_schema`` with an engine that constrains decoding
    (``vllm``), refused (400) with the others."""
    temperature: float | None = ignored()
    """Sampling is the recipe's (``[rollout]``): the trainer's log-probs must match it."""
    top_p: float | None = ignored()
    """As ``temperature``."""
    presence_penalty: float | None = ignored()
    """As ``temperature``."""
    frequency_penalty: float | None = ignored()
    """As ``temperature``."""
    logit_bias: dict[str, float] | None = ignored()
    """As ``temperature``."""
    seed: int | None = ignored()
    """The rollout engine seeds its sampler from ``run.seed``."""
    user: str | None = ignored()
    """An end-user id for OpenAI's abuse monitoring."""
    safety_identifier: str | None = ignored()
    """As ``user``."""
    prompt_cache_key: str | None = ignored()
    """OpenAI's prompt cache routing."""
    prompt_cache_retention: str | None = ignored()
    """As ``prompt_cache_key``."""
    metadata: dict[str, str] | None = ignored()
    """Stored completions' tags (nothing is stored)."""
    store: bool | None = ignored()
    """Nothing is stored: the gateway is stateless across episodes."""
    service_tier: str | None = ignored()
    """OpenAI's processing tier."""
    reasoning_effort: str | None = ignored()
    """OpenAI reasoning models' effort (the policy reasons as it was trained to)."""
    verbosity: str | None = ignored()
    """OpenAI models' answer length hint."""
    prediction: dict[str, Any] | None = ignored()
    """Predicted outputs (a latency optimisation)."""
    modalities: list[Literal["text"]] | None = honoured()
    """``["text"]`` only (audio is refused)."""
    audio: None = refused()
    """Audio output is refused: the policy writes text."""
    web_search_options: None = refused()
    """Web search is refused: offer a function tool instead."""
    functions: None = refused()
    """Legacy functions are refused: use ``tools``."""
    function_call: None = refused()
    """Legacy ``function_call`` is refused: use ``tool_choice``."""


# ---------------------------------------------------------------------------- responses
class ResponsesTool(_Body):
    type: FunctionType
    """Only function tools are served (no hosted tools: web search, files, computer...)."""
    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    """The function's name."""
    description: str | None = None
    """What it does."""
    parameters: dict[str, Any] | None = None
    """A JSON schema of its arguments."""
    strict: bool | None = None
    """Strict schema adherence; ignored."""


class ResponsesNamedChoice(_Body):
    type: Literal["function"]
    """Only functions can be named."""
    name: str
    """The function the model must call."""


class InputItem(_Body):
    """One item of ``input``: a message, a function call (the model's, echoed), or a
    function call's output."""

    type: Literal["message", "function_call", "function_call_output"] = "message"
    """The item's kind (``reasoning``, ``item_reference`` and hosted-tool items are refused:
    the gateway keeps no state and emits none of them)."""
    role: Literal["system", "developer", "user", "assistant"] | None = None
    """Messages: who speaks."""
    content: Content = None
    """Messages: text, or ``input_text`` / ``output_text`` parts."""
    call_id: str | None = None
    """Function calls and their outputs: the call's id."""
    name: str | None = None
    """Function calls: the function."""
    arguments: str | None = None
    """Function calls: the arguments' JSON text."""
    output: Content | None = None
    """Function call outputs: what the function returned."""
    id: str | None = None
    """The item id the gateway gave (ignored)."""
    status: str | None = None
    """The status the gateway gave (ignored)."""

    @model_validator(mode="after")
    def _by_type(self) -> InputItem:
        need = {"message": ("role", "content"), "function_call": ("call_id", "name", "arguments"),
                "function_call_output": ("call_id", "output")}[self.type]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.type} item needs {', '.join(missing)}")
        return self


class TextFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    """``text``, or a JSON answer (constrained decoding)."""
    name: str | None = None
    """``json_schema``: the schema's name."""
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    """``json_schema``: the JSON schema."""
    description: str | None = None
    """What the format is for."""
    strict: bool | None = None
    """Whether to follow the schema strictly (a constraining engine always does)."""


class TextConfig(_Body):
    format: TextFormat | None = None
    """The answer's format."""
    verbosity: str | None = None
    """OpenAI models' answer length hint; ignored."""


class ResponsesRequest(_Body):
    """The body of ``POST /v1/responses`` (stateless: every request carries the whole
    conversation, as the OpenAI Agents SDK sends it)."""

    model: str | None = honoured()
    """Any name: the episode's policy answers."""
    input: str | list[InputItem] = honoured(...)
    """A user message, or the conversation as items (messages, the gateway's function calls
    echoed, function call outputs)."""
    instructions: str | None = honoured()
    """A system message before ``input``."""
    tools: list[ResponsesTool] | None = honoured()
    """Function tools (hosted tools are refused)."""
    tool_choice: Literal["none", "auto", "required"] | ResponsesNamedChoice | None = honoured()
    """As in chat completions."""
    parallel_tool_calls: bool | None = honoured()
    """``false``: the turn ends after its first call."""
    max_output_tokens: int | None = honoured(ge=1)
    """Lowers the recipe's ``rollout.max_new_tokens`` (a reply cut by it is ``incomplete``)."""
    stream: bool | None = honoured()
    """Server-sent events (``response.created`` ... ``response.completed``)."""
    text: TextConfig | None = honoured()
    """``format``: ``text``, or JSON with an engine that constrains decoding."""
    include: list[str] | None = honoured()
    """``message.output_text.logprobs`` adds the engine's log-probs; others are ignored."""
    previous_response_id: None = refused()
    """Refused: the gateway stores no responses (send the whole conversation)."""
    conversation: None = refused()
    """Refused, as ``previous_response_id``."""
    prompt: None = refused()
    """Stored prompt templates are refused."""
    background: Literal[False] | None = refused()
    """Background responses are refused."""
    temperature: float | None = ignored()
    """Sampling is the recipe's (``[rollout]``)."""
    top_p: float | None = ignored()
    """As ``temperature``."""
    top_logprobs: int | None = ignored()
    """Alternatives are not reported."""
    truncation: str | None = ignored()
    """The gateway never drops context; a prompt that does not fit is refused."""
    reasoning: dict[str, Any] | None = ignored()
    """OpenAI reasoning models' settings."""
    store: bool | None = ignored()
    """Nothing is stored."""
    metadata: dict[str, str] | None = ignored()
    """Stored responses' tags (nothing is stored)."""
    user: str | None = ignored()
    """An end-user id for OpenAI's abuse monitoring."""
    safety_identifier: str | None = ignored()
    """As ``user``."""
    prompt_cache_key: str | None = ignored()
    """OpenAI's prompt cache routing."""
    prompt_cache_retention: str | None = ignored()
    """As ``prompt_cache_key``."""
    service_tier: str | None = ignored()
    """OpenAI's processing tier."""
    max_tool_calls: int | None = ignored()
    """Hosted tools' call limit (only function tools are served)."""
    context_management: list[Any] | None = ignored()
    """OpenAI's server-side context compaction (the gateway keeps none)."""
    stream_options: dict[str, Any] | None = ignored()
    """OpenAI's stream obfuscation."""


# ---------------------------------------------------------------------------- docs
def field_table(model: type[BaseModel]) -> str:
    """The markdown table of ``model``'s fields: name, treatment, what happens."""
    rows = ["| field | treatment | what the gateway does |", "| --- | --- | --- |"]
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        treatment = extra.get("gateway") if isinstance(extra, dict) else None
        note = " ".join((info.description or "").split()).replace("``", "`")
        rows.append(f"| `{info.alias or name}` | {treatment} | {note} |")
    return "\n".join(rows)


def docs_tables() -> str:
    """Both routes' tables, as ``docs/agents.md`` holds them."""
    return (
        "`POST /v1/chat/completions`:\n\n" + field_table(ChatCompletionsRequest)
        + "\n\n`POST /v1/responses`:\n\n" + field_table(ResponsesRequest) + "\n"
    )


def arguments_object(text: str) -> Any:
    """Tool-call arguments as the chat template wants them: the parsed JSON, or the text
    when it is not JSON (rendered as sent)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


if __name__ == "__main__":
    print(docs_tables(), end="")
