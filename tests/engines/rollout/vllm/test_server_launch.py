"""Launch failures of rollout servers: clear errors naming the server and its log, no leftovers.

These tests need no vLLM environment: a bogus interpreter, a server module that does not exist
in this interpreter (exits at once), and a process that never becomes healthy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.process import (
    ServerCommand,
    ServerError,
    ServerProcess,
    error_lines,
    live_group_members,
    wait_for_urls,
)
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.options import RLCTL_TRANSFER_BACKEND, VLLMOptions
from rlctl.engines.rollout.vllm.server import WORKER_EXTENSION_DIR, vllm_server_command
from rlctl.ports import free_port
from tests.engines.rollout.vllm.vllm_env import tiny_recipe


def gone(pid: int) -> bool:
    """True when ``pid`` no longer exists (or is a zombie nobody will use again)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(") ", 1)[1].startswith("Z")


def command(opts: VLLMOptions) -> ServerCommand:
    return vllm_server_command("vllm[0]", opts, model="/nonexistent-model", dtype="float32", seed=0,
                               device="cpu", transfer_backend=RLCTL_TRANSFER_BACKEND)


def test_command_line_is_eager_dev_mode_loopback_on_cpu():
    cmd = command(VLLMOptions(python="/opt/venv/bin/python", extra_args=["--max-num-seqs", "8"]))
    assert cmd.argv[:3] == ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    argv = " ".join(cmd.argv)
    assert f"--host 127.0.0.1 --port {cmd.port}" in argv
    assert "--enforce-eager" in cmd.argv and argv.endswith("--max-num-seqs 8")
    assert "--logprobs-mode processed_logprobs" in argv and "--generation-config vllm" in argv
    # split prefills of seeded requests crash vLLM's CPU sampler
    assert "--no-enable-chunked-prefill" in cmd.argv
    chunked = command(VLLMOptions(python="/opt/venv/bin/python",
                                  extra_args=["--enable-chunked-prefill"]))
    assert "--no-enable-chunked-prefill" not in chunked.argv  # the recipe's choice wins
    assert cmd.env == {"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                       # native weight sync's extension only
                       "PYTHONPATH": str(WORKER_EXTENSION_DIR)}
    # A separate interpreter must not see this venv's packages.
    assert "PYTHONPATH" in cmd.unset_env and "VIRTUAL_ENV" in cmd.unset_env
    gpu = vllm_server_command("v", VLLMOptions(python=sys.executable), model="m", dtype="bfloat16",
                              seed=0, device="cuda", transfer_backend=RLCTL_TRANSFER_BACKEND)
    assert "--enforce-eager" not in gpu.argv and "--gpu-memory-utilization" in gpu.argv
    assert "--no-enable-chunked-prefill" not in gpu.argv
    assert gpu.argv[0] == sys.executable and gpu.unset_env == ()


def test_bogus_interpreter_raises_named_error(tmp_path):
    server = ServerProcess(command(VLLMOptions(python="/no/such/python")), tmp_path / "s.log")
    with pytest.raises(
        ServerError, match=r"server vllm\[0\] could not be started.*/no/such/python"
    ):
        server.start()
    assert server.popen is None


def test_server_that_exits_at_once_raises_with_log_tail_and_is_reaped(tmp_path):
    # This interpreter has no vllm: `python -m vllm...` exits at once with "No module named".
    opts = VLLMOptions(server_module="rlctl_no_such_module.api_server")
    server = ServerProcess(command(opts), tmp_path / "s.log")
    started = time.monotonic()
    server.start()
    with pytest.raises(ServerError) as info:
        server.wait_healthy(timeout_s=60)
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert "server vllm[0] exited with code 1 before becoming healthy" in message
    # the cause, quoted
    assert "ModuleNotFoundError: No module named 'rlctl_no_such_module'" in message
    assert str(tmp_path / "s.log") in message
    assert server.popen is not None and server.popen.returncode == 1 and gone(server.pid)


def test_server_that_never_gets_healthy_times_out_and_its_group_is_killed(tmp_path):
    # The "server" starts a child of its own (as vLLM starts EngineCore) and never listens.
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print('CHILD_PID', child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    port = free_port()
    cmd = ServerCommand(name="stuck[0]", argv=[sys.executable, "-c", script], port=port)
    server = ServerProcess(cmd, tmp_path / "stuck.log")
    server.start()
    with pytest.raises(
        ServerError, match=r"server stuck\[0\] did not answer .*/health with 200 within 3 s"
    ):
        server.wait_healthy(timeout_s=3)
    child = int(
        next(
            line.split()[1]
            for line in server.log_tail().splitlines()
            if line.startswith("CHILD_PID ")
        )
    )
    # wait_healthy() stopped the server: it returns only once the whole group is dead.
    assert gone(server.pid) and gone(child) and live_group_members(server.pid) == []


def vanished_interpreter(recipe):
    """The engine spec of ``recipe`` whose interpreter was removed after the recipe validated
    (validation refuses a path that does not exist)."""
    spec = RolloutEngineSpec.from_loaded(validate_recipe(recipe))
    return replace(spec, options=spec.options.model_copy(update={"python": "/no/such/python"}))


def test_engine_load_with_bogus_interpreter_fails_fast_and_cleans_up():
    engine = VLLMRolloutEngine(vanished_interpreter(tiny_recipe(startup_timeout_s=30)))
    with pytest.raises(ServerError, match=r"vllm\[0\].*/no/such/python.*rlctl engines install"):
        engine.load()
    assert engine._workdir is None and engine._http is None  # temporary model dir removed


def test_engine_refuses_head_dims_the_cpu_backend_cannot_run():
    recipe = tiny_recipe(tiny={})  # the default tiny shape: head_dim 16
    engine = VLLMRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(recipe)))
    with pytest.raises(ValueError, match=r"head_dim = 16.*\[model.tiny\] head_dim = 32"):
        engine.load()


def test_attach_to_a_url_nobody_serves_fails_within_the_timeout():
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ServerError, match=rf"{url} did not answer /health with 200 within 1 s"):
        wait_for_urls([url], timeout_s=1)
    assert time.monotonic() - started < 5


def test_error_lines_quote_root_causes_first_and_skip_warnings():
    log = (
        "(APIServer) WARNING x fd limit errors like `OSError: [Errno 24] Too many open files`\n"
        "(Worker) ERROR y RuntimeError: Unsupported CPU attention configuration: head_dim=16\n"
        "(Worker) ERROR y RuntimeError: Unsupported CPU attention configuration: head_dim=16\n"
        "(APIServer) ERROR z vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
        "issue.\n"
    )
    assert error_lines(log) == [
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ]


def test_a_killed_owner_does_not_leave_its_server_behind(tmp_path):
    # The owner starts a server, then dies by SIGKILL (no finalizer, no atexit can run).
    owner_script = (
        "import sys, time\n"
        "from rlctl.engines.rollout.server.process import ServerCommand, ServerProcess\n"
        "cmd = ServerCommand(name='orphan[0]', port=1,\n"
        "                    argv=[sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "server = ServerProcess(cmd, sys.argv[1])\n"
        "server.start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", owner_script, str(tmp_path / "o.log")],
                             stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(owner.stdout.readline())
        time.sleep(0.5)  # let the guard exec the real command
        assert not gone(server_pid)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while not gone(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not gone(server_pid):
        os.kill(server_pid, signal.SIGKILL)  # do not leave it to the next tests either
        pytest.fail(f"server pid {server_pid} outlived its killed owner")
