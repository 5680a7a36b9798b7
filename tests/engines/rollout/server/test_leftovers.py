"""The leftover-server check finds a run's own live server by its logged command, and only it."""

from __future__ import annotations

import sys
import time

from rlctl.engines.rollout.server.process import ServerCommand, ServerProcess
from tests.engines.rollout.server.leftovers import logged_commands, servers_left_running


def _server(tmp_path, name: str) -> ServerProcess:
    # A Python "server" that never answers: only its process matters here (argv[1:] tells
    # two of them apart, as a run's own model directory does for real servers).
    argv = [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path / name)]
    return ServerProcess(ServerCommand(name=f"{name}[0]", argv=argv, port=1),
                         tmp_path / name / "logs" / f"{name}-0-1.log")


def test_a_live_server_is_found_and_a_stopped_one_is_not(tmp_path):
    mine, other = _server(tmp_path, "mine"), _server(tmp_path, "other")
    mine.start()
    other.start()  # another test's server, running meanwhile: not this run's business
    try:
        logs = tmp_path / "mine" / "logs"
        assert logged_commands(logs) == [mine.command.argv]
        deadline = time.monotonic() + 60  # the orphan guard execs the command right after
        while not (found := servers_left_running(logs)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [line.split(":")[0] for line in found] == [str(mine.pid)]  # not the other one
        mine.stop(grace_s=5)
        assert servers_left_running(logs) == []
    finally:
        mine.stop(grace_s=5)
        other.stop(grace_s=5)
