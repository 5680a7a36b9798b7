"""Colocated memory of the server engines: their flags, their requests, their reasons.

vLLM's sleep mode and SGLang's memory saver run on CUDA only (vLLM refuses the flag on CPU,
SGLang's release crashes its CPU server), so the requests go to a tiny real HTTP server
standing in for one (scripts/gpu_check.sh runs the real ones on a GPU)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from aiohttp import web

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.client import HTTPLoop, Replica
from rlctl.engines.rollout.server.process import ServerError
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.trainer.plan import plan_of


def tiny_recipe_dict(**sections: Any) -> Recipe:
    """A valid recipe with ``sections``."""
    return Recipe.model_validate({"data": {"task": "count_digits"}, **sections})

Seen = list[tuple[str, Any]]


@pytest.fixture
def stand_in() -> Iterator[tuple[str, Seen, dict[str, int]]]:
    """A loopback HTTP server recording every POST (path with query, JSON body); a path in
    ``fail`` answers that HTTP status instead."""
    seen: Seen = []
    fail: dict[str, int] = {}
    loop = asyncio.new_event_loop()

    async def handle(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        seen.append((request.path_qs, body))
        status = fail.get(request.path, 200)
        return web.json_response({"status": "ok"} if status == 200 else {"error": "no"},
                                 status=status)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", seen, fail
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


def _spec(backend: str, **patch: Any) -> RolloutEngineSpec:
    loaded = validate_recipe(tiny_recipe_dict(engines={"rollout": {"backend": backend}}))
    return replace(RolloutEngineSpec.from_loaded(loaded), **patch)


def _attached(engine: Any, url: str) -> Any:
    """``engine`` talking to ``url`` as if it had started a server there (the test stands in
    for load(), which would start a CUDA server)."""
    engine._replicas = [Replica(url, "rlctl-policy")]
    engine._http = HTTPLoop(10.0, 8)
    return engine


@pytest.mark.parametrize("engine_cls, release, weights, kv", [
    (VLLMRolloutEngine, ("/sleep?level=1&mode=wait", None),
     ("/wake_up?tags=weights", None), ("/wake_up?tags=kv_cache", None)),
    (SGLangRolloutEngine, ("/release_memory_occupation", {}),
     ("/resume_memory_occupation", {"tags": ["weights"]}),
     ("/resume_memory_occupation", {"tags": ["kv_cache", "cuda_graph"]})),
])
def test_release_then_weights_then_kv_cache(stand_in, engine_cls, release, weights, kv):
    url, seen, _ = stand_in
    engine = _attached(engine_cls(_spec(engine_cls.engine_name, device="cuda",
                                        release_memory=True)), url)
    try:
        assert engine.memory_release().releases
        engine.resume_memory(timeout_s=5)  # nothing released: nothing sent
        engine.release_memory(timeout_s=5)
        engine.release_memory(timeout_s=5)  # released already: sent once
        assert engine.released_memory == {"weights", "kv_cache"}
        engine.resume_memory(("weights",), timeout_s=5)
        engine.resume_memory(timeout_s=5)  # the KV cache only: the weights are back
        assert seen == [release, weights, kv] and not engine.released_memory
    finally:
        engine.close()


def test_a_failed_request_names_the_server_and_the_endpoint(stand_in):
    url, _, fail = stand_in
    fail["/sleep"] = 500
    engine = _attached(VLLMRolloutEngine(_spec("vllm", device="cuda", release_memory=True)), url)
    try:
        with pytest.raises(ServerError, match=r"releasing memory \(vLLM sleep mode, POST "
                           r"/sleep\?level=1&mode=wait, bound 5 s\) failed: server "
                           f"{url} answered POST /sleep.* with HTTP 500"):
            engine.release_memory(timeout_s=5)
    finally:
        engine.close()


@pytest.mark.parametrize("patch, why", [
    ({"device": "cpu", "release_memory": True}, "the rollout device is 'cpu' and vLLM sleep"),
    ({"device": "cuda", "release_memory": False}, "the step plan keeps the rollout's memory"),
])
def test_engines_that_do_not_release_say_why_and_send_nothing(stand_in, patch, why):
    url, seen, _ = stand_in
    engine = _attached(VLLMRolloutEngine(_spec("vllm", **patch)), url)
    try:
        release = engine.memory_release()
        assert not release.releases and why in release.why
        engine.release_memory(timeout_s=5)
        assert seen == [] and not engine.released_memory
    finally:
        engine.close()


def test_server_flags_only_where_the_servers_release():
    cuda = VLLMRolloutEngine(_spec("vllm", device="cuda", release_memory=True))
    cpu = VLLMRolloutEngine(_spec("vllm", device="cpu", release_memory=True))
    assert "--enable-sleep-mode" in cuda.server_command(0, "/m").argv
    assert "--enable-sleep-mode" not in cpu.server_command(0, "/m").argv
    sglang = SGLangRolloutEngine(_spec("sglang", device="cuda", release_memory=True))
    argv = sglang.server_command(0, "/m").argv
    assert "--enable-memory-saver" in argv and "--enable-weights-cpu-backup" in argv
    kept = SGLangRolloutEngine(_spec("sglang", device="cuda"))
    assert "--enable-memory-saver" not in kept.server_command(0, "/m").argv


@pytest.mark.parametrize("patch, choice, why", [
    ({"run": {"device": "cuda"}}, "release", "colocated with training"),
    ({"run": {"device": "cuda"}, "resources": {"placement": "split", "devices_per_node": 2}},
     "keep", 'resources.placement = "split"'),
    ({"run": {"device": "cpu"}}, "keep", 'run.device = "cpu"'),
    ({"run": {"device": "cuda"}, "algorithm": {"staleness": {
        "policy": "bounded", "options": {"max_staleness": 1}}}}, "keep", "streams"),
    ({"run": {"device": "cuda"}, "engines": {"rollout": {"backend": "vllm",
                                                         "release_memory": False}}},
     "keep", "engines.rollout.release_memory = false"),
    ({"run": {"device": "cuda"}, "engines": {"rollout": {"backend": "hf"}}}, "keep",
     "'hf' rollout engine cannot release"),
])
def test_the_plan_says_whether_the_rollout_releases_and_why(patch, choice, why):
    base = {"resources": {"mode": "ray"}, "engines": {"rollout": {"backend": "vllm"}}}
    for key, value in patch.items():
        base[key] = {**base.get(key, {}), **value}
    plan = plan_of(validate_recipe(tiny_recipe_dict(**base)))
    assert plan.rollout_memory.value == choice and why in plan.rollout_memory.why
    assert plan.releases_rollout_memory == (choice == "release")
