"""A tool that blocks or raises costs its own sessions only, and the user is told which tool
of which plugin did what, where (issue 30)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rlctl.agents.tools import CallLimits, ToolCall, ToolContext, ToolFailure, ToolRunner
from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.protocol.kv import KVBatchMeta
from rlctl.registry import build_registry, set_registry
from rlctl.run.entry import train_from_recipe
from rlctl.trainer.worker.sessions import step_notes
from tests.agents.agent_helpers import ScriptedPolicy, build_loop, recipe, record

ROOT = Path(__file__).resolve().parents[2]

# A third-party plugin as pip installs it (a dist-info with an entry point): tools that hang
# or raise, and a parser that makes every turn a call, so a run reaches the tool at once.
PLUGIN = '''
import os
import threading
from pathlib import Path

from rlctl.agents.observation import text_ids
from rlctl.agents.tools import ToolCall, function_schema
from rlctl.hookspecs import hookimpl

RELEASE = threading.Event()  # tests set it to let the hung threads end


class Hang:
    name = "hang"

    def __init__(self, options):
        pass

    def schema(self):
        return function_schema("hang", "never returns", {})

    def call(self, arguments, ctx):
        marker = os.environ.get("RLCTL_TEST_HANG_MARKER")
        if marker:
            Path(marker).touch()
        RELEASE.wait()
        return "late"


class Raises(Hang):
    name = "raises"

    def call(self, arguments, ctx):
        raise ValueError("the sandbox said no")


class EveryTurnCalls:
    stop_token_ids = ()

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def parse(self, text, names):
        return "", [ToolCall(names[0], {})]

    def render_results(self, results):
        return text_ids(self.tokenizer, "?")


@hookimpl
def register_tools(register):
    register("hang", Hang)
    register("raises", Raises)


@hookimpl
def register_tool_parsers(register):
    register("every_turn", EveryTurnCalls)
'''


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plugin")
    (root / "rlctl_test_tools.py").write_text(textwrap.dedent(PLUGIN))
    info = root / "rlctl_test_tools-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlctl-test-tools\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlctl]\ntesttools = rlctl_test_tools\n")
    return root


@pytest.fixture
def plugin(plugin_dir):
    """The plugin's module, registered in this process; its hung threads released after."""
    spec = importlib.util.spec_from_file_location("rlctl_test_tools",
                                                  plugin_dir / "rlctl_test_tools.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    set_registry(build_registry(external="none", extra=[module]))
    yield module
    module.RELEASE.set()
    set_registry(None)


def tool_recipe(tool: str, **options) -> Recipe:
    return recipe(agent_loop="tool", tool_parser="every_turn", tools=[{"name": tool}],
                  agent_loop_options={"max_turns": 2, **options})


def run_session(loop, session_id: int = 0):
    from rlctl.engines.rollout.contract import SamplingParams

    return loop.run(record(), session_id, SamplingParams(4), ScriptedPolicy(["1", "2<eos>"]))


@pytest.mark.timeout(60)
def test_a_sync_tool_that_never_returns_is_cut_off_without_holding_the_loop(plugin):
    loop = build_loop(tool_recipe("hang", tool_timeout_s=0.3))

    async def main():
        # the loop's default executor (where the hf engine and the data plane run) has one
        # thread: a hung tool there would starve it, on threads of its own it cannot
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=1))
        session = asyncio.create_task(run_session(loop))
        await asyncio.sleep(0.1)  # the tool is hanging now
        assert await asyncio.to_thread(lambda: "free") == "free"
        return await session

    started = time.monotonic()
    [out] = asyncio.run(main())  # returns: asyncio.run does not join the tool's thread
    assert time.monotonic() - started < 30
    assert out.metrics["tool_timeouts"] == 1 and out.metrics["tool_errors"] == 1
    [note] = out.notes
    assert 'tool "hang" of in-process plugin rlctl_test_tools' in note
    assert "did not return within tool_timeout_s = 0.3 s" in note


@pytest.mark.timeout(60)
def test_when_every_thread_of_a_tool_hangs_its_sessions_fail_naming_it(plugin):
    loop = build_loop(tool_recipe("hang", tool_timeout_s=0.3, tool_threads=1))

    async def main():
        [out] = await run_session(loop, 0)  # times out, its thread hangs on
        assert out.metrics["tool_timeouts"] == 1
        with pytest.raises(ToolFailure) as failure:
            await run_session(loop, 1)
        return str(failure.value)

    message = asyncio.run(main())
    assert 'tool "hang" of in-process plugin rlctl_test_tools' in message
    assert "all 1 of its threads (tool_threads)" in message and "tool_timeout_s" in message


def test_a_raising_tool_is_shown_with_its_plugin_exception_and_line(plugin):
    [out] = asyncio.run(run_session(build_loop(tool_recipe("raises"))))
    assert out.metrics["tool_errors"] == 1
    [note] = out.notes
    assert 'tool "raises" of in-process plugin rlctl_test_tools raised ValueError: ' in note
    assert "the sandbox said no at " in note and "rlctl_test_tools.py:" in note


def test_async_tools_need_no_threads():
    from rlctl.agents.builtin_tools import Calculator, Lookup

    runner = ToolRunner({"lookup": Lookup(), "calculator": Calculator()}, {}, threads=2)
    assert list(runner.threads) == ["calculator"]
    result = asyncio.run(runner.run(ToolCall("calculator", {"expression": "2+2"}),
                                    ToolContext(record(), 0), CallLimits(5, "observe", 99)))
    assert result.text == "4" and result.error is None


def test_a_step_shows_the_first_few_distinct_notes():
    tags = [{"notes": ["a", "b"]}, {}, {"notes": ["a"]}, {"notes": ["c", "d", "e"]}]
    meta = KVBatchMeta(keys=[f"k{i}" for i in range(4)], partition_id="train", tags=tags)
    assert step_notes(meta) == ["a", "b", "c", "... and 2 other distinct problem(s) this step"]
    assert step_notes(KVBatchMeta(keys=["k"], partition_id="train", tags=[{}])) == []


def local_recipe(out: Path, tool: str, **options) -> Recipe:
    return Recipe.model_validate({
        "run": {"name": "t", "seed": 0, "output_dir": str(out), "device": "cpu"},
        "model": {"path": "tiny", "dtype": "float32"},
        "data": {"task": "tool_secret"},
        "algorithm": {"prompts_per_step": 2, "group_size": 2},
        "rollout": {"max_new_tokens": 1, "agent_loop": "tool", "tool_parser": "every_turn",
                    "tools": [{"name": tool}],
                    "agent_loop_options": {"max_turns": 2, "max_total_tokens": 4, **options}},
        "rewards": [{"name": "tool_answer_match"}],
        "engines": {"train": {"ranks": 1, "micro_batch_size": 4}},
        "data_plane": {"backend": "memory"},
        "resources": {"mode": "local"},
        "schedule": {"total_steps": 1},
        "logging": {"sinks": ["jsonl"], "progress": False},
    })


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_shows_a_raising_tool_once_per_step_and_keeps_it_in_the_run_log(
        plugin, tmp_path, capsys):
    code = train_from_recipe(validate_recipe(local_recipe(tmp_path, "raises")), quiet=True)
    assert code == 0
    err = capsys.readouterr().err
    shown = [line for line in err.splitlines() if "the sandbox said no" in line]
    assert len(shown) == 1, err  # once per step, however many sessions hit it
    assert 'step 1: tool "raises" of in-process plugin rlctl_test_tools raised ValueError' \
        in shown[0] and "rlctl_test_tools.py:" in shown[0]
    log = (tmp_path / "t" / "run.log").read_text()
    assert "warning: step 1: tool \"raises\"" in log and "the sandbox said no" in log
    import json

    [row] = [json.loads(x) for x in (tmp_path / "t" / "metrics.jsonl").read_text().splitlines()]
    assert row["agent/tool_errors"] == 1.0


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_whose_tool_hangs_for_good_fails_naming_the_tool_plugin_and_bound(
        plugin, tmp_path, capsys):
    # 4 sessions call the tool; one thread: the first call hangs past its 1 s, the rest fail
    recipe_ = local_recipe(tmp_path, "hang", tool_timeout_s=1.0, tool_threads=1)
    started = time.monotonic()
    code = train_from_recipe(validate_recipe(recipe_), quiet=True)
    assert code == 1
    assert time.monotonic() - started < 120
    err = capsys.readouterr().err
    assert 'tool "hang" of in-process plugin rlctl_test_tools' in err
    assert "tool_threads" in err and "tool_timeout_s" in err and "Traceback" not in err


def _spawn_hung_run(tmp_path: Path, plugin_dir: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    marker = tmp_path / "tool-called"
    toml = tmp_path / "hang.toml"
    plane = "memory" if mode == "local" else "ray"
    toml.write_text(textwrap.dedent(f"""
        [run]
        name = "hang"
        output_dir = "{tmp_path / 'runs'}"
        device = "cpu"
        [model]
        path = "tiny"
        dtype = "float32"
        [data]
        task = "tool_secret"
        [algorithm]
        prompts_per_step = 2
        group_size = 2
        [rollout]
        max_new_tokens = 1
        agent_loop = "tool"
        tool_parser = "every_turn"
        [rollout.agent_loop_options]
        max_turns = 2
        max_total_tokens = 4
        tool_timeout_s = 3000
        [[rollout.tools]]
        name = "hang"
        [[rewards]]
        name = "tool_answer_match"
        [engines.train]
        ranks = 1
        micro_batch_size = 4
        [data_plane]
        backend = "{plane}"
        [resources]
        mode = "{mode}"
        num_cpus = 2
        devices_per_node = 1
        [schedule]
        total_steps = 1
        sample_timeout_s = 3000
        [logging]
        sinks = ["jsonl"]
        progress = false
    """))
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{plugin_dir}",
               RLCTL_PLUGINS="testtools", RLCTL_TEST_HANG_MARKER=str(marker))
    proc = subprocess.Popen([sys.executable, "-m", "rlctl", "train", str(toml), "--quiet"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, marker


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["local", pytest.param("ray", marks=pytest.mark.heavy)])
def test_sigterm_stops_a_run_whose_tool_never_returns_within_seconds(
        tmp_path, plugin_dir, mode):
    """The hung call holds a thread for good: SIGTERM still ends the run (it used to take a
    SIGKILL in --local), exit 143."""
    proc, marker = _spawn_hung_run(tmp_path, plugin_dir, mode)
    try:
        deadline = time.monotonic() + 200
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended (exit {proc.returncode}) before its tool hung: "
                            f"{proc.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, "the tool was never called"
            time.sleep(0.2)
        time.sleep(1.0)  # the call is well under way
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 143, err[-3000:]
    assert took < 30, f"SIGTERM took {took:.1f} s"
    assert "terminated" in err and "Traceback" not in err, err[-3000:]


def test_tool_threads_are_daemons_named_for_the_tool(plugin):
    """A hung call's thread must not keep the interpreter alive at exit."""
    loop = build_loop(tool_recipe("hang", tool_timeout_s=0.2))
    asyncio.run(run_session(loop))
    hung = [t for t in threading.enumerate() if t.name == "rlctl-tool"]
    assert hung and all(t.daemon for t in hung)
