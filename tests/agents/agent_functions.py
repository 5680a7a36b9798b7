"""Agent functions for the gateway tests
(``agent_loop_options.agent = "tests.agents.agent_functions:..."``)."""

from __future__ import annotations

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "arithmetic",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}
SEEN: list = []  # (record, responses) of each episode, for the tests to inspect


async def two_turns(client, record):
    """Ask, add a user message, ask again: one output of two turns."""
    messages = [{"role": "user", "content": str(record.prompt)}]
    first = await client.chat.completions.create(
        model="policy", messages=messages, tools=[CALCULATOR], max_tokens=6, logprobs=True
    )
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "user", "content": "and 6*8?"})
    second = await client.chat.completions.create(
        model="policy", messages=messages, tools=[CALCULATOR], max_tokens=6
    )
    SEEN.append((record, [first, second]))
    return 1.0


async def summarising(client, record):
    """The second request drops the history: the gateway starts a second output."""
    q = [{"role": "user", "content": "q"}]
    first = await client.chat.completions.create(model="policy", messages=q, max_tokens=4)
    fresh = [{"role": "user", "content": "summary: " + (first.choices[0].message.content or "")}]
    second = await client.chat.completions.create(model="policy", messages=fresh, max_tokens=4)
    SEEN.append((record, [first, second]))
    return 0.5


async def greedy(client, record):
    """Asks until refused (the turn limit)."""
    messages = [{"role": "user", "content": "go"}]
    while True:
        reply = await client.chat.completions.create(
            model="policy", messages=messages, max_tokens=2
        )
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "more"},
        ]


async def flaky(client, record):
    """Session 1 of each prompt raises after its first turn (a framework failing): the
    episode is scored 0 and the run goes on."""
    reply = await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": str(record.prompt)}], max_tokens=3
    )
    if record.session_id == 1:
        raise RuntimeError("the framework gave up: unknown tool 'search'")
    return 1.0 if reply.choices[0].message.content else 0.5


async def one_request(client, record):
    """One request, whatever it takes."""
    await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}], max_tokens=2)
    return 1.0


async def always_fails(client, record):
    """Every episode raises before its first request: all are scored 0, the run goes on."""
    raise ValueError("unparseable structured output")


def not_async(client, record):
    """A plain function: refused at validate."""
    return 1.0
