"""Agent functions written with real agent frameworks, for the gateway tests
(``agent_loop_options.agent = "tests.agents.framework_agents:..."``).

Each gives the model one tool, ``add(a, b)``, and asks the record's prompt; the policy of
the tests (:func:`tests.agents.agent_helpers.chat_policy`) calls it, reads its result and
answers. Each returns 1.0 when the framework's final answer says ``5``.
"""

from __future__ import annotations

import warnings
from typing import Any

RESULTS: list[Any] = []  # what each episode's framework returned, for the tests to inspect


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _score(text: Any) -> float:
    RESULTS.append(text)
    return 1.0 if "5" in str(text) else 0.0


async def _agents_sdk(client: Any, record: Any, *, responses: bool, stream: bool,
                      max_turns: int = 10) -> float:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)  # no trace export to api.openai.com
    model_cls = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    agent = Agent(name="calc", instructions="Use the add tool.", tools=[function_tool(add)],
                  model=model_cls(model="policy", openai_client=client))
    if stream:
        result = Runner.run_streamed(agent, str(record.prompt), max_turns=max_turns)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, str(record.prompt), max_turns=max_turns)
    return _score(result.final_output)


async def agents_sdk_responses(client: Any, record: Any) -> float:
    """The OpenAI Agents SDK with its default model: the Responses API."""
    return await _agents_sdk(client, record, responses=True, stream=False)


async def agents_sdk_responses_streamed(client: Any, record: Any) -> float:
    return await _agents_sdk(client, record, responses=True, stream=True)


async def agents_sdk_chat(client: Any, record: Any) -> float:
    """The Agents SDK on chat completions (``OpenAIChatCompletionsModel``)."""
    return await _agents_sdk(client, record, responses=False, stream=False)


async def agents_sdk_chat_streamed(client: Any, record: Any) -> float:
    return await _agents_sdk(client, record, responses=False, stream=True)


async def agents_sdk_one_turn(client: Any, record: Any) -> float:
    """The Agents SDK with ``max_turns = 1``: the tool call uses it up and the SDK raises
    ``MaxTurnsExceeded`` (a framework failing the episode)."""
    return await _agents_sdk(client, record, responses=True, stream=False, max_turns=1)


async def _langgraph(client: Any, record: Any, *, stream: bool) -> float:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    llm = ChatOpenAI(model="policy", base_url=str(client.base_url), api_key=client.api_key,
                     max_retries=0, streaming=stream)
    with warnings.catch_warnings():  # LangGraph 1.x points at langchain.agents (not installed)
        warnings.simplefilter("ignore", DeprecationWarning)
        graph = create_react_agent(llm, [tool(add)])
    inputs = {"messages": [("user", str(record.prompt))]}
    if stream:
        text = ""
        async for chunk, _ in graph.astream(inputs, stream_mode="messages"):
            if chunk.type == "AIMessageChunk":
                text += str(chunk.content)
        return _score(text)
    out = await graph.ainvoke(inputs)
    return _score(out["messages"][-1].content)


async def langgraph_react(client: Any, record: Any) -> float:
    """LangChain's ``ChatOpenAI`` with tools in LangGraph's ReAct agent."""
    return await _langgraph(client, record, stream=False)


async def langgraph_react_streamed(client: Any, record: Any) -> float:
    """As :func:`langgraph_react`, streamed with ``stream_mode="messages"``."""
    return await _langgraph(client, record, stream=True)


async def _pydantic_ai(client: Any, record: Any, *, stream: bool) -> float:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("policy", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, tools=[add], instructions="Use the add tool.")
    if stream:
        async with agent.run_stream(str(record.prompt)) as result:
            return _score(await result.get_output())
    result = await agent.run(str(record.prompt))
    return _score(result.output)


async def pydantic_ai_agent(client: Any, record: Any) -> float:
    """pydantic-ai on chat completions."""
    return await _pydantic_ai(client, record, stream=False)


async def pydantic_ai_streamed(client: Any, record: Any) -> float:
    return await _pydantic_ai(client, record, stream=True)


async def pydantic_ai_typed(client: Any, record: Any) -> float:
    """pydantic-ai asked for an ``int``: it forces a call of its output tool
    (``tool_choice = "required"``) and raises ``UnexpectedModelBehavior`` when the model's
    answers stay invalid past its retries (a framework failing on the model's behaviour)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("policy", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, output_type=int, retries=1)
    result = await agent.run(str(record.prompt))
    return _score(result.output)
