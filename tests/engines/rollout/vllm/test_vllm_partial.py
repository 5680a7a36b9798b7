"""Partial rollouts on a real vLLM server (CPU, eager): weight updates in the middle of long
responses abort the requests in flight, which resume on the new weights keeping their tokens.

Skipped unless vLLM's own environment is built (``rlctl engines install vllm``). One server
for the module (about 30-60 s to start on 2 shared cores); the updates go through the real
``vllm`` weight sync (native, ``file`` transport) inside the engine's ``weight_update``, as the
rollout worker runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.weight_sync import VLLMWeightSync
from rlctl.testing.server_checkpoint import save_server_checkpoint
from tests.engines.rollout.server.partial_checks import PartialRolloutChecks
from tests.engines.rollout.vllm.vllm_env import (
    VLLM_PYTHON,
    engine_spec,
    requires_vllm_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_vllm_env, pytest.mark.slow, pytest.mark.timeout(300)]


def partial_recipe(checkpoint: Path) -> Recipe:
    recipe = tiny_recipe(str(checkpoint), python=VLLM_PYTHON, startup_timeout_s=240,
                         ignore_eos=True,  # every response is exactly MAX_NEW tokens
                         log_stats=True)  # the decoded-token counter the checks wait on
    data = recipe.model_dump()
    # partial rollouts need a streaming policy (config checks)
    data["algorithm"]["staleness"].update(policy="bounded", partial_rollout="resume")
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    checkpoint = save_server_checkpoint(tmp_path_factory.mktemp("tiny-vllm-partial"))
    e = VLLMRolloutEngine(engine_spec(partial_recipe(checkpoint)))
    e.load()
    yield e
    e.close()


class TestVLLMPartial(PartialRolloutChecks):
    name = "vllm"
    abort_path = "abort_requests"
    metric = r"vllm:generation_tokens_total\{[^}]*\}"  # counted every engine step
    sync = VLLMWeightSync
    state = staticmethod(sharpened_state)
