"""Partial rollouts on a real vLLM server (CPU, eager): weight updates in the middle of long
responses abort the requests in flight, which resume on the new weights keeping their tokens.

Skipped unless vLLM's own environment is built (``rlctl engines install vllm``). The engine
under test attaches to the package's server (``vllm_server``, ``conftest.py``: started logging
the stats the hold reads), reset to the checkpoint's weights first; the updates go through
the real ``vllm`` weight sync (native, ``file`` transport) inside the engine's
``weight_update``, as the rollout worker runs them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest

from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.server.process import ServerProcess
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from tests.engines.rollout.server.partial_checks import (
    HOLD_BOUND_S,
    PROMPTS,
    DecodingHold,
    PartialRolloutChecks,
    check_still_running,
    metric_sum,
    post_to_server,
)
from tests.engines.rollout.server.shared_server import on_checkpoint_weights
from tests.engines.rollout.vllm.vllm_env import (
    engine_spec,
    requires_vllm_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.timeout(300)]

KEY_ENV = "RLCTL_TEST_VLLM_PARTIAL_KEY"


def partial_recipe(urls: list[str]) -> Recipe:
    """An engine attached to ``urls`` (the key in ``KEY_ENV``) with partial rollouts."""
    recipe = tiny_recipe("unused-in-attach-mode", urls=urls, api_key_env=KEY_ENV,
                         startup_timeout_s=60,
                         ignore_eos=True)  # every response is exactly MAX_NEW tokens
    data = recipe.model_dump()
    # partial rollouts need a streaming policy (config checks)
    data["algorithm"]["staleness"].update(policy="bounded", partial_rollout="resume")
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def engine(vllm_server: VLLMRolloutEngine) -> Iterator[VLLMRolloutEngine]:
    on_checkpoint_weights(vllm_server, VLLMWeightSync(), sharpened_state(0))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, vllm_server.replicas[0].api_key)
        e = VLLMRolloutEngine(engine_spec(partial_recipe(vllm_server.urls)))
        e.load()
    e.stamp_version(vllm_server.weight_version)  # the version the server now answers
    yield e
    e.close()  # an attached engine leaves the server running
    # the package's next user starts from the checkpoint's weights again (on_checkpoint_weights)


class PausedScheduler(DecodingHold):
    """vLLM's ``POST /pause?mode=keep`` (dev mode) freezes every request where it is: the
    scheduler schedules no token while ``PAUSED_ALL`` (``vllm/v1/core/sched/scheduler.py``:
    ``token_budget = 0``), requests keep their tokens and KV cache and new ones queue; an
    abort still answers them with their tokens (``/abort_requests`` ends them in the API
    server's output processor; the engine core handles aborts while paused). ``/resume``
    schedules them again (``vllm/v1/engine/core.py``, ``pause_scheduler``).

    The batch goes into a paused server and is let through in steps: ``/resume``, then
    ``/pause`` again as soon as ``/resume`` has answered, until the server has counted a first
    token of every request (``vllm:time_to_first_token_seconds_count``: one sample per
    request). What runs unheld is what the server decodes between those two calls, never
    the whole batch's 96 steps; the sync's own ``/pause`` and ``/resume`` would also lift the
    hold (``resume`` is idempotent)."""

    first_tokens = r"vllm:time_to_first_token_seconds_count\{[^}]*\}"
    pause = "/pause?mode=keep&clear_cache=false"

    def hold(self, engine: VLLMRolloutEngine) -> None:
        self.before = metric_sum(engine, self.first_tokens)
        post_to_server(engine, self.pause)

    def until_every_request_decoded(self, engine: VLLMRolloutEngine,
                                    running: threading.Thread) -> None:
        deadline = time.monotonic() + HOLD_BOUND_S
        while metric_sum(engine, self.first_tokens) - self.before < len(PROMPTS):
            check_still_running(engine, running, deadline)
            post_to_server(engine, "/resume")
            post_to_server(engine, self.pause)
        check_still_running(engine, running, deadline)

    def release(self, engine: VLLMRolloutEngine) -> None:
        post_to_server(engine, "/resume")


class TestVLLMPartial(PartialRolloutChecks):
    name = "vllm"
    abort_path = "abort_requests"
    hold = PausedScheduler

    @pytest.fixture
    def server(self, vllm_server: VLLMRolloutEngine) -> ServerProcess:
        return vllm_server.servers[0]  # the attached engine has none of its own

    def served_as(self, engine: VLLMRolloutEngine) -> str:
        return re.escape(engine.urls[0])  # an attached server is named by its URL
    sync = VLLMWeightSync
    state = staticmethod(sharpened_state)
