"""Partial rollouts on a real SGLang server (CPU, torch_native attention): weight updates in
the middle of long responses abort the requests in flight, which resume on the new weights
keeping their tokens.

Skipped unless SGLang's own environment is built (``rlctl engines install sglang``). One server
for the module (about 40-70 s to start on 2 shared cores); the updates go through the real
``sglang`` weight sync (``tensor`` transport) inside the engine's ``weight_update``, as the
rollout worker runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from rlctl.testing.server_checkpoint import save_server_checkpoint
from tests.engines.rollout.server.partial_checks import PartialRolloutChecks
from tests.engines.rollout.sglang.sglang_env import (
    SGLANG_PYTHON,
    requires_sglang_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.timeout(300)]


def partial_recipe(checkpoint: Path) -> Recipe:
    recipe = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON, startup_timeout_s=300,
                         ignore_eos=True,  # every response is exactly MAX_NEW tokens
                         # the decoded-token counter the checks wait on, updated every step
                         extra_args=["--enable-metrics", "--decode-log-interval", "1"])
    data = recipe.model_dump()
    # partial rollouts need a streaming policy (config checks)
    data["algorithm"]["staleness"].update(policy="bounded", partial_rollout="resume")
    return Recipe.model_validate(data)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    checkpoint = save_server_checkpoint(tmp_path_factory.mktemp("tiny-sglang-partial"))
    loaded = validate_recipe(partial_recipe(checkpoint))
    e = SGLangRolloutEngine(RolloutEngineSpec.from_loaded(loaded))
    e.load()
    yield e
    e.close()


class TestSGLangPartial(PartialRolloutChecks):
    name = "sglang"
    abort_path = "abort_request"
    # decoded tokens, counted at every decode step (--decode-log-interval 1 above)
    metric = r'sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\}'
    sync = SGLangWeightSync
    state = staticmethod(sharpened_state)
