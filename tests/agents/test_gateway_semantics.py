"""What the gateway honours, with the real ``openai`` client and a scripted chat policy:
tool calls (and malformed ones), tool_choice, parallel_tool_calls, stop, the shapes clients
send, replies matched by meaning, streaming, the Responses API, constrained JSON."""

from __future__ import annotations

import json

import pytest

from rlctl.agents.observation import chat_delta_ids
from tests.agents.agent_helpers import TOOL_CALL
from tests.agents.gateway_harness import ADD, TOK, USER, run

EOS = TOK.eos_token_id


def ids(text: str) -> list[int]:
    return TOK(text, add_special_tokens=False)["input_ids"]


def rendered(messages, **kw) -> list[int]:
    return list(TOK.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                        return_dict=False, **kw))


def closed(h):
    return h.gateway.close(h.session)


def test_tool_calls_come_back_as_tool_calls_and_the_result_is_appended_once():
    async def scenario(h):
        first = await h.chat(USER, tools=[ADD])
        msg = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        [call] = msg.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 2,
                                                                                   "b": 3})
        assert "<tool_call>" not in msg.content and msg.content.startswith("<think>")
        convo = [*USER, msg.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        second = await h.chat(convo, tools=[ADD])
        assert "The sum is 5." in second.choices[0].message.content
        return h

    h = run(scenario)
    [out] = closed(h)
    gen1, gen2 = h.policy.returned
    obs = chat_delta_ids(TOK, [{"role": "tool", "tool_call_id": "x", "content": "5"}])
    assert out.prompt_ids == rendered(USER, tools=[ADD])
    assert out.response_ids == gen1 + obs + gen2 and out.num_turns == 2


def test_a_malformed_call_stays_visible_as_text_and_is_counted():
    bad = '<tool_call>\n{"name": "add", "arguments": {"a": 2,,}}\n</tool_call>'

    async def scenario(h):
        reply = await h.chat(USER, tools=[ADD])
        assert reply.choices[0].message.tool_calls is None
        assert reply.choices[0].message.content == bad
        assert reply.choices[0].finish_reason == "stop"
        assert h.session.counts["malformed_tool_calls"] == 1

    run(scenario, reply=lambda context: bad)


def test_tool_choice_none_reads_no_calls():
    async def scenario(h):
        reply = await h.chat(USER, tools=[ADD], tool_choice="none")
        assert reply.choices[0].message.tool_calls is None
        assert "<tool_call>" in reply.choices[0].message.content

    run(scenario)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "add"}}],
                         ids=["required", "named"])
def test_a_forced_call_starts_the_turn_with_its_opening_as_observation_tokens(choice):
    named = isinstance(choice, dict)
    opening = '<tool_call>\n{"name": "add", "arguments": ' if named else "<tool_call>\n"

    def reply(context):  # the policy continues whatever the turn starts with
        if context.endswith('"arguments": '):
            return '{"a": 1, "b": 1}}\n</tool_call>'
        if context.endswith("<tool_call>\n"):
            return '{"name": "add", "arguments": {"a": 1, "b": 1}}\n</tool_call>'
        return "no call"

    async def scenario(h):
        answer = await h.chat(USER, tools=[ADD], tool_choice=choice)
        [call] = answer.choices[0].message.tool_calls
        assert call.function.name == "add"
        return h

    h = run(scenario, reply=reply)
    [out] = closed(h)
    forced = ids(opening)
    context, _ = h.policy.requests[0]
    assert context == rendered(USER, tools=[ADD]) + forced
    assert out.response_ids[: len(forced)] == forced
    assert out.loss_mask == [0] * len(forced) + [1] * len(h.policy.returned[0])


def test_parallel_tool_calls_false_ends_the_turn_after_the_first_call():
    two = TOOL_CALL + TOOL_CALL.split("</think>\n\n")[1]

    async def scenario(h):
        answer = await h.chat(USER, tools=[ADD], parallel_tool_calls=False)
        msg = answer.choices[0].message
        assert len(msg.tool_calls) == 1
        convo = [*USER, msg.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "5"}]
        await h.chat(convo, tools=[ADD], parallel_tool_calls=False)
        return h

    h = run(scenario, reply=lambda context: "done" if "<tool_response>" in context else two)
    close_id = TOK.convert_tokens_to_ids("</tool_call>")
    assert close_id in h.policy.requests[0][1].stop_token_ids
    [out] = closed(h)
    gen1, gen2 = h.policy.returned
    assert gen1[-1] == close_id  # cut at the first call, without its end-of-turn
    obs = chat_delta_ids(TOK, [{"role": "tool", "tool_call_id": "x", "content": "5"}])
    # the cut turn gets the end-of-turn token the template writes, before the result
    assert out.response_ids == gen1 + [EOS] + obs + gen2


def test_stop_strings_end_the_reply_and_the_tokens_after_them_are_dropped():
    async def scenario(h):
        answer = await h.chat(USER, stop=["END", "zzz"])
        assert answer.choices[0].message.content == "one two "
        assert answer.choices[0].finish_reason == "stop"
        convo = [*USER, answer.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "go on"}]
        await h.chat(convo)
        return h

    h = run(scenario, reply=lambda context: "one two END three")
    [out] = closed(h)
    kept = ids("one two END")
    assert out.response_ids[: len(kept) + 1] == kept + [EOS]
    assert out.rollout_log_probs[: len(kept)] == [-0.25] * len(kept)


@pytest.mark.parametrize("edit", ["whitespace", "think dropped", "content None",
                                  "arguments reformatted", "parts"])
def test_a_reply_re_sent_in_another_form_continues_the_same_output(edit):
    async def scenario(h):
        first = await h.chat(USER, tools=[ADD])
        msg = first.choices[0].message.model_dump(exclude_none=True)
        call = msg["tool_calls"][0]
        if edit == "whitespace":
            msg["content"] = "  " + msg["content"].replace("\n", "\n\n") + "\n"
        elif edit == "think dropped":
            msg["content"] = ""
        elif edit == "content None":
            msg["content"] = None
        elif edit == "arguments reformatted":
            args = json.loads(call["function"]["arguments"])
            call["function"]["arguments"] = json.dumps(args, indent=2, sort_keys=True)
        else:
            msg["content"] = [{"type": "text", "text": msg["content"]}]
        convo = [*USER, msg, {"role": "tool", "tool_call_id": call["id"], "content": "5"}]
        await h.chat(convo, tools=[ADD])
        return h

    [out] = closed(run(scenario))
    assert out.num_turns == 2


def test_an_edited_reply_starts_a_new_output():
    async def scenario(h):
        first = await h.chat(USER, tools=[ADD])
        msg = first.choices[0].message.model_dump(exclude_none=True)
        msg["tool_calls"][0]["function"]["arguments"] = '{"a": 9, "b": 3}'
        await h.chat([*USER, msg, {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"],
                                   "content": "12"}], tools=[ADD])
        return h

    assert [o.num_turns for o in closed(run(scenario))] == [1, 1]


def test_content_parts_are_joined_and_developer_is_rendered_as_system():
    messages = [{"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "what is"},
                                             {"type": "text", "text": "2+3?"}]}]

    async def scenario(h):
        await h.chat(messages)
        return h

    [out] = closed(run(scenario, reply=lambda context: "5"))
    assert out.prompt_ids == rendered([{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "what is\n2+3?"}])


def test_a_turn_cut_by_max_tokens_ends_with_the_end_of_turn_token_when_continued():
    async def scenario(h):
        cut = await h.chat(USER, max_tokens=3)
        assert cut.choices[0].finish_reason == "length"
        await h.chat([*USER, cut.choices[0].message.model_dump(exclude_none=True),
                      {"role": "user", "content": "go on"}])
        return h

    h = run(scenario, reply=lambda context: "a long answer")
    [out] = closed(h)
    gen1, gen2 = h.policy.returned
    obs = chat_delta_ids(TOK, [{"role": "user", "content": "go on"}])
    assert len(gen1) == 3 and out.response_ids == gen1 + [EOS] + obs + gen2
    assert out.loss_mask == [1] * 3 + [0] * (1 + len(obs)) + [1] * len(gen2)


def test_a_json_answer_is_asked_of_an_engine_that_constrains_decoding():
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}}

    async def scenario(h):
        await h.chat(USER, response_format={"type": "json_schema", "json_schema": {
            "name": "answer", "schema": schema}})
        await h.client.responses.create(model="policy", input="2+3?",
                                        text={"format": {"type": "json_object"}})
        return h

    h = run(scenario, reply=lambda context: '{"sum": 5}', json_schema=True)
    assert [json.loads(s.json_schema) for _, s in h.policy.requests] == [schema,
                                                                          {"type": "object"}]


def test_logprobs_are_the_engines():
    async def scenario(h):
        answer = await h.chat(USER, logprobs=True)
        content = answer.choices[0].logprobs.content
        assert [c.logprob for c in content] == [-0.25] * len(h.policy.returned[0])
        assert "".join(c.token for c in content) == "hi<|im_end|>"

    run(scenario, reply=lambda context: "hi")


# ---------------------------------------------------------------------------- streaming
def test_a_streamed_chat_completion_carries_the_text_the_calls_and_the_usage():
    async def scenario(h):
        plain = await h.chat(USER, tools=[ADD])
        other = h.other_session()
        h.client.api_key = other.key
        stream = await h.chat(USER, tools=[ADD], stream=True,
                              stream_options={"include_usage": True})
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices]
        want = plain.choices[0].message
        assert text == want.content and finish[-1] == "tool_calls"
        assert [(t.function.name, t.function.arguments) for t in calls] == [
            (want.tool_calls[0].function.name, want.tool_calls[0].function.arguments)]
        assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens

    run(scenario)


# ---------------------------------------------------------------------------- responses
def test_the_responses_api_maps_items_onto_the_same_session():
    async def scenario(h):
        tools = [{"type": "function", "name": "add", "description": "Add two integers.",
                  "parameters": ADD["function"]["parameters"]}]
        first = await h.client.responses.create(model="policy", input="what is 2+3?",
                                                instructions="use tools", tools=tools)
        kinds = [item.type for item in first.output]
        assert kinds == ["message", "function_call"] and first.status == "completed"
        call = first.output[1]
        items = [{"role": "user", "content": "what is 2+3?"},
                 *[item.model_dump(exclude_none=True) for item in first.output],
                 {"type": "function_call_output", "call_id": call.call_id, "output": "5"}]
        second = await h.client.responses.create(model="policy", input=items,
                                                 instructions="use tools", tools=tools)
        assert "The sum is 5." in second.output_text
        return h

    h = run(scenario)
    [out] = closed(h)
    system = [{"role": "system", "content": "use tools"}, *USER]
    assert out.prompt_ids == rendered(system, tools=[ADD]) and out.num_turns == 2


def test_responses_stream_their_events_and_a_cut_reply_is_incomplete():
    async def scenario(h):
        stream = await h.client.responses.create(model="policy", input="hi", stream=True,
                                                 max_output_tokens=2)
        events = [e async for e in stream]
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert "response.output_text.delta" in kinds and kinds[-1] == "response.incomplete"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1].response
        assert final.status == "incomplete"
        assert final.incomplete_details.reason == "max_output_tokens"
        assert final.output_text == "ab"

    run(scenario, reply=lambda context: "abcdef")
