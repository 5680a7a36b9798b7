"""Partial rollouts on a real SGLang server (CPU, torch_native attention): weight updates in
the middle of long responses abort the requests in flight, which resume on the new weights
keeping their tokens.

Skipped unless SGLang's own environment is built (``rlctl engines install sglang``). The engine
under test attaches to the package's server (``sglang_server``, ``conftest.py``: started with
the metrics whose decoded-token counter the checks wait on), reset to the checkpoint's weights
first; the updates go through the real ``sglang`` weight sync (``tensor`` transport) inside the
engine's ``weight_update``, as the rollout worker runs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.process import ServerProcess
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from tests.engines.rollout.server.partial_checks import PartialRolloutChecks
from tests.engines.rollout.server.shared_server import on_checkpoint_weights
from tests.engines.rollout.sglang.sglang_env import (
    requires_sglang_env,
    sharpened_state,
    tiny_recipe,
)

pytestmark = [requires_sglang_env, pytest.mark.slow, pytest.mark.timeout(300)]


KEY_ENV = "RLCTL_TEST_SGLANG_PARTIAL_KEY"


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
def engine(sglang_server: SGLangRolloutEngine) -> Iterator[SGLangRolloutEngine]:
    on_checkpoint_weights(sglang_server, SGLangWeightSync(), sharpened_state(0))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, sglang_server.replicas[0].api_key)
        e = SGLangRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(
            partial_recipe(sglang_server.urls))))
        e.load()
    e.stamp_version(sglang_server.weight_version)  # the version the server now answers
    yield e
    e.close()  # an attached engine leaves the server running
    # the package's next user starts from the checkpoint's weights again (on_checkpoint_weights)


class TestSGLangPartial(PartialRolloutChecks):
    name = "sglang"
    abort_path = "abort_request"
    # decoded tokens, counted at every decode step (--decode-log-interval 1 above)
    metric = r'sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\}'
    sync = SGLangWeightSync
    state = staticmethod(sharpened_state)

    @pytest.fixture
    def server(self, sglang_server: SGLangRolloutEngine) -> ServerProcess:
        return sglang_server.servers[0]  # the attached engine has none of its own

    def served_as(self, engine: SGLangRolloutEngine) -> str:
        return re.escape(engine.urls[0])  # an attached server is named by its URL
