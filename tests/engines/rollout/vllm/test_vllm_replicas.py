"""Two vLLM servers behind one engine: requests spread, weight sync reaches both, a death is named.

Skipped unless vLLM's own environment is built. Two servers start side by side (about 3.2 GB
of RAM each; the start takes one to three minutes on 2 shared cores); the last test kills one.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest

from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.server.client import get_json
from rlctl.engines.rollout.server.process import ServerError, live_group_members
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.options import VLLMWeightSyncOptions
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.testing.rollout_contract import greedy
from rlctl.testing.server_checkpoint import PARITY_PROMPTS
from tests.engines.rollout.vllm.test_vllm_engine import (  # noqa: F401 - fixtures
    hf,
    sharpened_state,
    transfer_stats,
)
from tests.engines.rollout.vllm.vllm_env import VLLM_PYTHON, engine_spec, requires_vllm_env

# heavy: two servers at once (~6.5 GB, minutes on 2 cores); test_vllm_engine covers one server.
pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(600)]

PROMPTS = PARITY_PROMPTS
SYNC = {"transport": "http_bytes", "bucket_mb": 0.1}  # [engines.rollout.weight_sync_options]


@pytest.fixture(scope="module")
def engine(checkpoint, tmp_path_factory):  # the package's checkpoint (conftest.py)
    from tests.engines.rollout.vllm.vllm_env import TINY_SHAPE

    logs = tmp_path_factory.mktemp("vllm-logs")
    recipe = Recipe.model_validate({
        "run": {"seed": 0, "device": "cpu"},
        "resources": {"devices_per_node": 2},  # a device per server
        "model": {"path": str(checkpoint), "dtype": "float32", "tiny": TINY_SHAPE},
        "engines": {"rollout": {"backend": "vllm", "replicas": 2, "options": {
            "python": VLLM_PYTHON, "startup_timeout_s": 420, "log_dir": str(logs),
        }, "weight_sync_options": SYNC}},
    })
    e = VLLMRolloutEngine(engine_spec(recipe))
    started = time.monotonic()
    e.load()
    print(f"\n2 vllm servers up (health + warm-up) in {time.monotonic() - started:.1f} s")
    yield e
    e.close()


def completions_served(engine) -> list[int]:
    """``POST /v1/completions`` lines in each server's access log."""
    return [
        len(re.findall(r'"POST /v1/completions HTTP', s.log_path.read_text()))
        for s in engine.servers
    ]


def test_requests_are_spread_over_both_servers(engine):
    assert [s.name for s in engine.servers] == ["vllm[0]", "vllm[1]"]
    before = completions_served(engine)
    gens = engine.generate_batch(PROMPTS * 4, max_new_tokens=4, temperature=1.0, seed=0)
    assert len(gens) == 24
    served = [a - b for a, b in zip(completions_served(engine), before, strict=True)]
    print(f"\nrequests per server: {served}")
    assert served == [12, 12]  # round-robin


def test_weight_sync_reaches_both_servers(engine, hf):  # noqa: F811
    sync = VLLMWeightSync(VLLMWeightSyncOptions(**SYNC))
    v2 = sharpened_state(1)
    sync(v2, engine, 7)
    print(f"\nnative http_bytes sync to 2 servers took {sync.last_update_s:.2f} s")
    for replica in engine.replicas:
        served = get_json(replica.url + "/weight_info", api_key=replica.api_key)
        assert served == {"weight_version": "7"}
        assert transfer_stats(engine, replica)["updates"] == 1
    hf.update_weights(v2, version=7)
    # 12 requests alternate over the servers: both answer like hf with the new weights.
    ours = greedy(engine, PROMPTS * 2)
    assert [g.token_ids for g in ours] == [g.token_ids for g in greedy(hf, PROMPTS * 2)]
    assert {g.weight_version for g in ours} == {7}


def test_one_server_dying_mid_rollout_is_named_and_nothing_is_left(engine):
    victim = engine.servers[1]
    errors: list[BaseException] = []

    def rollout() -> None:
        try:
            engine.generate_batch(PROMPTS * 100, max_new_tokens=48, temperature=1.0, seed=1)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=rollout)
    thread.start()
    time.sleep(0.5)  # requests are in flight on both servers
    os.killpg(victim.pid, signal.SIGKILL)
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ServerError), errors
    # The error names the dead server. Whether it also says "died with exit code -9" is a race:
    # the kernel closes the sockets a moment before the process becomes reapable.
    assert re.search(r"server vllm\[1\] failed: ", str(errors[0])), str(errors[0])[:600]
    assert victim.popen.wait(timeout=10) == -9
    pids = [s.pid for s in engine.servers]
    engine.close()
    assert all(live_group_members(pid) == [] for pid in pids)
