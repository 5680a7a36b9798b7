"""The ``tool`` plugin kind: what a tool is and how one call runs (with its limits).

A registered tool target is ``target(options) -> Tool``. Build it cheaply (connect lazily):
the controller builds the tools once to put their schemas into the chat template, and each
rollout worker builds its own to call them.

A :class:`Tool` has a ``name``, a ``schema()`` (the OpenAI function description whose
``parameters`` is a JSON schema; chat templates render it) and ``call(arguments, ctx)``,
sync or async, returning the result text. :class:`ToolRunner` runs one call under a timeout:
a hung tool is cut off, a raising tool becomes an error result (or a session failure when the
loop's ``on_tool_error = "fail"``). A synchronous tool runs on threads of its own
(:class:`ToolThreads`), so one that never returns costs its own sessions only.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rlctl.agents.contract import PluginChoice, PromptRecord
from rlctl.plugin_errors import PluginCallError

if TYPE_CHECKING:
    from rlctl.registry import Registration


@dataclass
class ToolContext:
    """What a tool call knows about its episode."""

    record: PromptRecord
    """The prompt (its ``ground_truth`` may carry data meant for tools, never shown to the
    model)."""
    session_id: int
    """Which of the prompt's sessions calls."""
    state: dict[str, Any] = field(default_factory=dict)
    """Scratch space shared by the tool calls of one session (per tool name)."""


@runtime_checkable
class Tool(Protocol):
    """A callable tool (see the module docstring)."""

    name: str

    def schema(self) -> dict[str, Any]: ...

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any: ...


@dataclass(frozen=True)
class ToolCall:
    """One call read out of a generated turn."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None
    """Why the call could not be read (bad JSON...); the loop answers it with this error."""


@dataclass(frozen=True)
class ToolResult:
    """What one call returned: the text the model reads, and how it went."""

    name: str
    text: str
    ok: bool = True
    timed_out: bool = False
    error: str | None = None
    """For the user, when the call failed: which tool of which plugin, what it raised and
    where (``file:line``); the model reads only :attr:`text`."""


class ToolFailure(RuntimeError):
    """A tool call failed and the loop is set to fail the session (``on_tool_error = "fail"``),
    or a tool's threads are all held by calls that never returned."""


def function_schema(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """An OpenAI-style function description (what chat templates expect for ``tools=``)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(required or []),
            },
        },
    }


@dataclass(frozen=True)
class CallLimits:
    """How one call may run (the ``tool`` loop's options)."""

    timeout_s: float
    on_error: str
    """``observe``: a failed call is an error result the model reads; ``fail``: it raises
    :class:`ToolFailure`."""
    max_chars: int


class ToolRunner:
    """The recipe's tools, who registered each, and the threads of each synchronous tool.

    :meth:`run` runs one call under :class:`CallLimits`: unknown tools, bad arguments,
    exceptions and timeouts become error results the model reads (or :class:`ToolFailure`).
    Every failure also carries, for the user, the tool, its plugin, the exception and the
    ``file:line`` it came from (:attr:`ToolResult.error`).
    """

    def __init__(self, tools: dict[str, Tool], regs: Mapping[str, Registration],
                 *, threads: int) -> None:
        self.tools = tools
        self.regs = dict(regs)
        self.threads = {name: ToolThreads(threads) for name, tool in tools.items()
                        if not inspect.iscoroutinefunction(tool.call)}

    @classmethod
    def build(cls, choices: Sequence[PluginChoice], registry: Any, *,
              threads: int) -> ToolRunner:
        """:func:`build_tools` of the recipe's ``[[rollout.tools]]``, with their registrations."""
        tools = build_tools(choices, registry)
        by_section = [registry.get("tool", choice.name) for choice in choices]
        regs = dict(zip(tools, by_section, strict=True))
        return cls(tools, regs, threads=threads)

    def describe(self, name: str) -> str:
        """``tool "x" of plugin p (entry point ...)``, or the bare name when unknown."""
        reg = self.regs.get(name)
        return reg.describe() if reg is not None else f"tool {name!r}"

    async def run(self, call: ToolCall, ctx: ToolContext, limits: CallLimits) -> ToolResult:
        """Run one call (see the class docstring)."""
        # The model's own mistakes (an unreadable call, an unknown name) are for the model to
        # read, and counted; they are not the tool's fault, so nothing is shown to the user.
        if call.error is not None:
            return _failed(call, limits, call.error, None)
        tool = self.tools.get(call.name)
        if tool is None:
            return _failed(call, limits, f"no tool named {call.name!r} (tools: "
                           f"{', '.join(sorted(self.tools))})", None)
        threads = self.threads.get(call.name)
        try:
            if threads is None:
                value = await asyncio.wait_for(tool.call(call.arguments, ctx), limits.timeout_s)
            else:
                value = await threads.run(tool.call, (call.arguments, ctx), limits.timeout_s)
        except ToolThreadsStuck as exc:
            raise ToolFailure(f"{self.describe(call.name)}: {exc}; the session fails rather "
                              "than wait behind it (make the tool return, or async with its "
                              "own timeout)") from None
        except TimeoutError:
            return _failed(call, limits, f"timed out after {limits.timeout_s:g} s",
                           f"{self.describe(call.name)} did not return within "
                           f"tool_timeout_s = {limits.timeout_s:g} s", timed_out=True)
        except ToolFailure:
            raise
        except Exception as exc:  # noqa: BLE001 -- the model reads what went wrong, as a result
            return _failed(call, limits, f"{type(exc).__name__}: {exc}", self._raised(
                call.name, tool, exc))
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > limits.max_chars:
            text = text[: limits.max_chars] + "...(truncated)"
        return ToolResult(call.name, text)

    def _raised(self, name: str, tool: Tool, exc: Exception) -> str:
        reg = self.regs.get(name)
        if reg is None:
            return f"tool {name!r} raised {type(exc).__name__}: {exc}"
        return str(PluginCallError.from_exception(reg, exc, tool.call))


def _failed(call: ToolCall, limits: CallLimits, text: str, error: str | None, *,
            timed_out: bool = False) -> ToolResult:
    """The failed call's result, or :class:`ToolFailure` when the loop fails sessions.
    ``error``: what the user is shown (``None``: the model's own mistake, shown to it only)."""
    if limits.on_error == "fail":
        raise ToolFailure(f"tool call {call.name!r} failed: {error or text}")
    return ToolResult(call.name, f"error: {text}", ok=False, timed_out=timed_out, error=error)


class ToolThreadsStuck(RuntimeError):
    """Every thread of a synchronous tool is held by a call that ran past its timeout."""


@dataclass
class _Call:
    abandoned: bool = False
    finished: bool = False


class ToolThreads:
    """Daemon threads of one synchronous tool: at most ``size`` of its calls run at once.

    Not the event loop's default executor: the ``hf`` engine's generate and the data plane's
    async calls run there, so a tool that never returns would take its threads one by one
    until everything queued behind it. Nor a ``ThreadPoolExecutor``: the interpreter joins its
    threads at exit, so a hung call would keep a stopped run alive. A call past its timeout is
    abandoned (a running thread cannot be stopped): its thread runs on and holds its slot until
    it returns. When every slot is held so, the tool hangs for good; its next call raises
    :class:`ToolThreadsStuck` at once instead of waiting.
    """

    POLL_S = 0.02  # how often a call waiting for a slot looks again

    def __init__(self, size: int) -> None:
        self.size = size
        self.running = 0
        self.abandoned = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> Any:
        """``fn(*args)`` on a thread of its own; :class:`TimeoutError` past ``timeout_s``
        (waiting for a slot included)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self._take_slot():
            if loop.time() >= deadline:
                raise TimeoutError
            await asyncio.sleep(self.POLL_S)
        call = _Call()
        future: asyncio.Future[Any] = loop.create_future()
        threading.Thread(target=self._work, args=(fn, args, call, loop, future), daemon=True,
                         name="rlctl-tool").start()
        try:
            return await asyncio.wait_for(future, max(deadline - loop.time(), 0.0))
        except (TimeoutError, asyncio.CancelledError):
            with self._lock:
                if not call.finished:
                    call.abandoned = True
                    self.abandoned += 1
            raise

    def _take_slot(self) -> bool:
        with self._lock:
            if self.running < self.size:
                self.running += 1
                return True
            if self.abandoned >= self.size:
                raise ToolThreadsStuck(
                    f"all {self.size} of its threads (tool_threads) are held by calls that ran "
                    "past tool_timeout_s and have not returned")
            return False

    def _work(self, fn: Callable[..., Any], args: tuple[Any, ...], call: _Call,
              loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(*args), None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the awaiting session
            outcome = (None, exc)
        with self._lock:
            call.finished = True
            self.running -= 1
            if call.abandoned:
                self.abandoned -= 1
        try:
            loop.call_soon_threadsafe(_settle, future, outcome)
        except RuntimeError:
            pass  # the loop is closed (the step ended): nobody waits for this call


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if future.done():  # timed out or cancelled meanwhile
        return
    value, error = outcome
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def build_tools(choices: Sequence[PluginChoice], registry: Any) -> dict[str, Tool]:
    """The recipe's ``[[rollout.tools]]`` by name (each with its options as validated at
    load; :func:`rlctl.agents.contract.tool_choices`)."""
    tools: dict[str, Tool] = {}
    for choice in choices:
        tool = registry.load("tool", choice.name)(choice.options)
        name = tool.name or choice.name
        if name in tools:
            raise ValueError(f"two [[rollout.tools]] are named {name!r}; give each tool once")
        tools[name] = tool
    return tools
