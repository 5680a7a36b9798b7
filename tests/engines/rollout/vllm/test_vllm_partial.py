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
from pathlib import Path

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


class HeldSteps(DecodingHold):
    """The server's test-only ``held_steps`` logits processor (``shim/held_steps.py``,
    on the package's server): while the gate file holds a number of seconds, each engine step
    sleeps that long before sampling, so the batch's 96 steps take minutes, while an abort,
    handled between steps, still ends every running request at the next step boundary with its
    tokens. The hold is on before the batch is sent and lifted after the first update.

    vLLM's own ``/pause?mode=keep`` does not serve: the batch must reach its first tokens, and
    letting it through in steps (``/resume``, then ``/pause`` again) runs the scheduler unheld
    between the two calls, long enough to finish the tiny model's whole batch (0.3 s) when the
    test thread is descheduled on a loaded machine."""

    step_s = 0.5
    """The remaining 95 steps take at least 47 s: far beyond any update's abort."""
    first_tokens = r"vllm:time_to_first_token_seconds_count\{[^}]*\}"

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def hold(self, engine: VLLMRolloutEngine) -> None:
        self.before = metric_sum(engine, self.first_tokens)
        self.gate.write_text(str(self.step_s))

    def until_every_request_decoded(self, engine: VLLMRolloutEngine,
                                    running: threading.Thread) -> None:
        # one first-token sample per request (the server counts it when the token is out)
        deadline = time.monotonic() + HOLD_BOUND_S
        while metric_sum(engine, self.first_tokens) - self.before < len(PROMPTS):
            check_still_running(engine, running, deadline)
            time.sleep(0.05)
        check_still_running(engine, running, deadline)

    def release(self, engine: VLLMRolloutEngine) -> None:
        self.gate.unlink(missing_ok=True)


class TestVLLMPartial(PartialRolloutChecks):
    name = "vllm"
    abort_path = "abort_requests"

    @pytest.fixture
    def hold(self, held_steps_gate: Path) -> HeldSteps:
        return HeldSteps(held_steps_gate)

    @pytest.fixture
    def server(self, vllm_server: VLLMRolloutEngine) -> ServerProcess:
        return vllm_server.servers[0]  # the attached engine has none of its own

    def served_as(self, engine: VLLMRolloutEngine) -> str:
        return re.escape(engine.urls[0])  # an attached server is named by its URL
    sync = VLLMWeightSync
    state = staticmethod(sharpened_state)
