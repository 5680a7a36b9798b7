"""Server engines' API keys (issue 30): a fresh key per run goes to the servers rlctl starts
(vLLM by variable, SGLang on its command line, blanked in the log) and on every request the
client sends; a keyed aiohttp server stands in for one here (the real servers: the vllm and
sglang engine tests)."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest
from aiohttp import web

from rlctl.engines.rollout.server.client import HTTPLoop, Replica, fetch_json, get_json, post_json
from rlctl.engines.rollout.server.process import ServerCommand, ServerError
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine

KEY = "k" * 43


def test_vllm_gets_its_key_by_variable_and_sglang_from_a_private_file(tmp_path):
    import stat

    command = ServerCommand("sglang[0]", ["python", "-m", "server"], 8000, env={"A": "1"})
    vllm = VLLMRolloutEngine.with_api_key(None, command, KEY)  # type: ignore[arg-type]
    assert vllm.env == {"A": "1", "VLLM_API_KEY": KEY} and KEY not in vllm.argv

    class Engine(SGLangRolloutEngine):
        workdir = tmp_path  # the engine's private work directory

    sglang = Engine.with_api_key(Engine.__new__(Engine), command, KEY)
    assert KEY not in " ".join(sglang.argv)  # a command line is readable by every user
    config = Path(sglang.argv[sglang.argv.index("--config") + 1])
    assert config.read_text() == f'api-key: "{KEY}"\n'
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert VLLMRolloutEngine.takes_api_key and SGLangRolloutEngine.takes_api_key


@pytest.fixture
def keyed_server():
    """A server on 127.0.0.1 that answers only requests bearing KEY."""
    loop = asyncio.new_event_loop()

    async def answer(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/x", answer)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def test_the_client_sends_the_key_on_every_request(keyed_server):
    http = HTTPLoop(10.0, 4)
    try:
        good = Replica(keyed_server, "m", api_key=KEY)
        assert http.run(post_json(http, good, "/x", {})) == {"ok": True}
        assert http.run(fetch_json(http, good, "/x")) == {"ok": True}
        assert get_json(keyed_server + "/x", api_key=KEY) == {"ok": True}
        bare = Replica(keyed_server, "m")
        with pytest.raises(ServerError, match="HTTP 401"):
            http.run(post_json(http, bare, "/x", {}))
        with pytest.raises(ServerError, match="401"):
            get_json(keyed_server + "/x")
    finally:
        http.close()


def test_api_key_env_must_name_a_variable():
    from pydantic import ValidationError

    from rlctl.engines.rollout.vllm.options import VLLMOptions

    assert VLLMOptions(api_key_env="MY_KEY").api_key_env == "MY_KEY"
    with pytest.raises(ValidationError):
        VLLMOptions(api_key_env="not a name")
