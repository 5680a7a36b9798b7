"""What the gateway refuses, and how: an OpenAI-style JSON error before any token is
generated, nothing recorded; a failed turn leaves the trajectory as it was; a conversation
that cannot fit is refused without holding up other episodes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rlctl.agents import gateway_schema
from tests.agents.gateway_harness import ADD, USER, run
from tests.config.config_helpers import ROOT

CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]}

# (name, route, body, the error's param): each must be a 400 that names the field
MALFORMED = [
    ("messages are numbers", "chat/completions", {"messages": [1, 2]}, "messages[0]"),
    ("messages a string", "chat/completions", {"messages": "hi"}, "messages"),
    ("no messages", "chat/completions", {"messages": []}, "messages"),
    ("messages missing", "chat/completions", {"model": "policy"}, "messages"),
    ("unknown role", "chat/completions", {"messages": [{"role": "wizard", "content": "x"}]},
     "messages[0].role"),
    ("user without content", "chat/completions", {"messages": [{"role": "user"}]},
     "messages[0]"),
    ("content not text", "chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:,"}}]}]}, "messages[0].content"),
    ("content a number", "chat/completions", {"messages": [{"role": "user", "content": 7}]},
     "messages[0].content"),
    ("max_tokens many", "chat/completions", {"messages": USER, "max_tokens": "many"},
     "max_tokens"),
    ("max_tokens 0", "chat/completions", {"messages": USER, "max_tokens": 0}, "max_tokens"),
    ("n a list", "chat/completions", {"messages": USER, "n": [2]}, "n"),
    ("n 2", "chat/completions", {"messages": USER, "n": 2}, "n"),
    ("tool not a function", "chat/completions",
     {"messages": USER, "tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ("tool without function", "chat/completions",
     {"messages": USER, "tools": [{"type": "function"}]}, "tools[0].function"),
    ("tool name with spaces", "chat/completions", {"messages": USER, "tools": [
        {"type": "function", "function": {"name": "add two"}}]}, "tools[0].function.name"),
    ("tools an object", "chat/completions", {"messages": USER, "tools": ADD}, "tools"),
    ("tool call arguments an object", "chat/completions", {"messages": [
        *USER, {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "add", "arguments": {}}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
    ("tool_choice required without tools", "chat/completions",
     {"messages": USER, "tool_choice": "required"}, "tool_choice"),
    ("tool_choice names an unknown function", "chat/completions",
     {"messages": USER, "tools": [ADD],
      "tool_choice": {"type": "function", "function": {"name": "mul"}}}, "tool_choice"),
    ("tool_choice a word", "chat/completions", {"messages": USER, "tool_choice": "always"},
     "tool_choice"),
    ("unknown tool_call_id", "chat/completions", {"messages": [
        *USER, CALL, {"role": "tool", "tool_call_id": "call_9", "content": "5"}]},
     "messages[2].tool_call_id"),
    ("tool message without id", "chat/completions",
     {"messages": [*USER, {"role": "tool", "content": "5"}]}, "messages[1]"),
    ("stream yes", "chat/completions", {"messages": USER, "stream": "yes"}, "stream"),
    ("temperature hot", "chat/completions", {"messages": USER, "temperature": "hot"},
     "temperature"),
    ("unknown field", "chat/completions", {"messages": USER, "frobnicate": 1}, "frobnicate"),
    ("legacy functions", "chat/completions",
     {"messages": USER, "functions": [{"name": "add"}]}, "functions"),
    ("audio", "chat/completions", {"messages": USER, "audio": {"voice": "x"}}, "audio"),
    ("json answer on hf", "chat/completions",
     {"messages": USER, "response_format": {"type": "json_object"}}, "response_format"),
    ("top_logprobs", "chat/completions", {"messages": USER, "top_logprobs": 3}, "top_logprobs"),
    ("responses: no input", "responses", {"model": "policy"}, "input"),
    ("responses: reasoning item", "responses",
     {"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ("responses: stored response", "responses",
     {"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
    ("responses: hosted tool", "responses",
     {"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ("responses: unknown call_id", "responses", {"input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "call_9", "output": "5"}]},
     "input[1].call_id"),
    ("responses: json answer on hf", "responses",
     {"input": "hi", "text": {"format": {"type": "json_schema", "name": "a",
                                         "schema": {"type": "object"}}}}, "text.format"),
]


@pytest.mark.parametrize(("route", "body", "param"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_a_malformed_request_is_a_json_400_before_any_token(route, body, param, caplog):
    async def scenario(h):
        status, answer = await h.post(route, body)
        assert status == 400, answer
        assert answer["error"]["type"] == "invalid_request_error"
        assert answer["error"]["param"] == param, answer
        assert answer["error"]["message"]
        # nothing was generated or recorded
        assert h.policy.requests == [] and h.session.traj is None and h.session.turns == 0
        assert h.session.counts["refused_requests"] == 1

    with caplog.at_level(logging.DEBUG):
        run(scenario)
    # no "Error handling request" traceback from aiohttp, no line of ours: a client's mistake
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000, b"{", b"[1, 2]", b"null"],
                         ids=["100k deep", "not JSON", "a list", "null"])
def test_bodies_that_are_not_a_json_object_are_a_400(raw):
    async def scenario(h):
        status, answer = await h.post("chat/completions", None, raw=raw)
        assert status == 400 and answer["error"]["type"] == "invalid_request_error"
        assert h.policy.requests == []

    run(scenario)


def test_unknown_routes_methods_and_keys_are_json_errors_naming_what_is_served():
    async def scenario(h):
        status, answer = await h.post("completions", {"prompt": "x"})
        assert status == 404 and "POST /v1/chat/completions" in answer["error"]["message"]
        assert "POST /v1/responses" in answer["error"]["message"]
        async with h.http.get(f"{h.gateway.base_url}/chat/completions") as reply:
            assert reply.status == 405
            assert "is not served" in (await reply.json())["error"]["message"]
        status, answer = await h.post("chat/completions", {"messages": USER}, key="guess")
        assert status == 401 and answer["error"]["type"] == "authentication_error"

    run(scenario)


def test_a_turn_that_fails_records_nothing_and_its_retry_appends_once(caplog):
    failures = []

    async def scenario(h):
        engine = h.gateway.generate

        async def flaky(prompt_ids, sampling):
            if len(h.policy.requests) == 1 and not failures:  # the second turn fails once
                failures.append(1)
                raise RuntimeError("the engine went away")
            return await engine(prompt_ids, sampling)

        h.gateway.generate = flaky
        first = await h.chat(USER)
        before = list(h.session.traj.response_ids)
        convo = [*USER, first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "and 3+4?"}]
        status, answer = await h.post("chat/completions", {"messages": convo})
        assert status == 500 and answer["error"]["type"] == "server_error"
        assert "the engine went away" in answer["error"]["message"]
        assert h.session.traj.response_ids == before and h.session.turns == 1
        await h.chat(convo)  # the agent's retry
        return h

    with caplog.at_level(logging.WARNING, logger="rlctl.agents.gateway"):
        h = run(scenario, reply=lambda context: "ok")
    [out] = h.gateway.close(h.session)
    text = h.gateway.tokenizer.decode(out.prompt_ids + out.response_ids)
    assert text.count("and 3+4?") == 1 and out.num_turns == 2
    # one line in the log, no traceback
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert record.exc_info is None and "\n" not in record.getMessage()


def test_a_message_larger_than_the_model_is_refused_and_others_are_served():
    async def scenario(h):
        other = h.other_session()
        huge = [{"role": "user", "content": "x" * (1 << 20)}]  # 1 MiB
        long = [{"role": "user", "content": "y" * 2000}]  # fits the bound, not the positions
        answers = await asyncio.gather(
            h.post("chat/completions", {"messages": huge}),
            h.post("chat/completions", {"messages": USER}, key=other.key),
            h.post("chat/completions", {"messages": long}),
        )
        (s1, a1), (s2, a2), (s3, a3) = answers
        assert s1 == 400 and a1["error"]["param"] == "messages"
        assert "characters" in a1["error"]["message"]
        assert s3 == 400 and "1024 positions" in a3["error"]["message"]
        assert s2 == 200 and a2["choices"][0]["message"]["content"] == "hello"
        assert len(h.policy.requests) == 1 and h.session.traj is None

    run(scenario, reply=lambda context: "hello")


def test_a_spent_token_budget_answers_length_and_the_next_request_starts_a_new_output():
    async def scenario(h):
        first = await h.chat(USER)
        convo = [*USER, first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "more " * 20}]
        spent = await h.chat(convo)
        assert spent.choices[0].finish_reason == "length"
        assert spent.choices[0].message.content == "" and len(h.policy.requests) == 1
        await h.chat([*convo, spent.choices[0].message.model_dump(exclude_none=True),
                       {"role": "user", "content": "again"}])
        return h

    h = run(scenario, reply=lambda context: "a" * 30, max_total_tokens=60)
    outs = h.gateway.close(h.session)
    assert [o.num_turns for o in outs] == [1, 1]  # each output ends on the model's own turn
    assert all(o.loss_mask[-1] == 1 for o in outs)


def test_the_docs_list_every_field_and_what_the_gateway_does_with_it():
    docs = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    start, end = "<!-- gateway-fields:start -->\n", "<!-- gateway-fields:end -->"
    assert start in docs and end in docs
    shown = docs.split(start, 1)[1].split(end, 1)[0]
    assert shown == gateway_schema.docs_tables(), (
        "docs/agents.md's gateway field tables are stale: paste "
        "python -m rlctl.agents.gateway_schema between the gateway-fields markers")


IGNORED = {
    "temperature": 0.2, "top_p": 0.5, "presence_penalty": 1.0, "frequency_penalty": 1.0,
    "logit_bias": {"5": 10}, "seed": 3, "user": "u", "safety_identifier": "s",
    "prompt_cache_key": "k", "prompt_cache_retention": "24h", "metadata": {"a": "b"},
    "store": True, "service_tier": "auto", "reasoning_effort": "low", "verbosity": "low",
    "prediction": {"type": "content", "content": "x"},
}


def test_every_ignored_field_is_accepted_and_changes_nothing():
    table = gateway_schema.ChatCompletionsRequest.model_fields
    declared = {n for n, f in table.items() if f.json_schema_extra["gateway"] == "ignored"}
    assert declared == set(IGNORED)

    async def scenario(h):
        plain = await h.chat(USER)
        other = h.other_session()
        status, answer = await h.post("chat/completions", {"messages": USER, **IGNORED},
                                      key=other.key)
        assert status == 200
        assert answer["rlctl"]["token_ids"] == plain.model_extra["rlctl"]["token_ids"]
        assert h.policy.requests[0][1] == h.policy.requests[1][1]  # the same sampling

    run(scenario, reply=lambda context: "same")

