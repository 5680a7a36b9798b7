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
import threading
import time
from collections.abc import Iterator

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.server.process import ServerProcess
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.engines.rollout.sglang.weight_sync import SGLangWeightSync
from tests.engines.rollout.server.partial_checks import (
    HOLD_BOUND_S,
    PROMPTS,
    DecodingHold,
    PartialRolloutChecks,
    check_still_running,
    metric_sum,
    metric_sums,
    post_to_server,
)
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


class SlowedForwards(DecodingHold):
    """SGLang's ``POST /slow_down {"forward_sleep_time": s}`` (a testing API: the scheduler
    sleeps ``s`` before every forward, ``sglang/srt/managers/scheduler.py`` ``run_batch``) makes
    the batch's 96 steps take minutes while an abort, read between forwards, still ends every
    running request at its next forward with its tokens.

    SGLang's ``/pause_generation`` does not serve here: ``in_place`` holds the requests, but
    an abort ends a running request only at its next forward (``abort_request``: ``to_finish``),
    which a paused scheduler never runs, so the engine's abort would never be answered;
    ``retract`` moves them to the waiting queue, where an abort answers only the tokens the
    tokenizer manager has seen (none, for a request that is not streamed).

    The hold is on before the batch is sent; it is lifted after the first update once the
    last decode step ran all of the batch's requests (``sglang:num_running_reqs``, logged at
    every decode step with ``--decode-log-interval 1``, like the decoded-token counter)."""

    forward_sleep_s = 0.5
    """The remaining 94 steps take at least 47 s: far beyond any update's abort."""
    decoded = r'sglang:realtime_tokens_total\{[^}]*mode="decode"[^}]*\}'
    running = r"sglang:num_running_reqs\{[^}]*\}"

    def hold(self, engine: SGLangRolloutEngine) -> None:
        self.before = metric_sum(engine, self.decoded)
        post_to_server(engine, "/slow_down", {"forward_sleep_time": self.forward_sleep_s})

    def until_every_request_decoded(self, engine: SGLangRolloutEngine,
                                    running: threading.Thread) -> None:
        # The step's counter is raised a moment before its gauge is set: a read in between
        # pairs a new count with the last batch's gauge. Two equal reads 50 ms apart (a step
        # takes 0.5 s) are of one step, its gauge set.
        deadline, last = time.monotonic() + HOLD_BOUND_S, None
        while True:
            check_still_running(engine, running, deadline)
            read = metric_sums(engine, self.decoded, self.running)
            if read == last and read[0] > self.before and read[1] == len(PROMPTS):
                return
            last = read
            time.sleep(0.05)

    def release(self, engine: SGLangRolloutEngine) -> None:
        post_to_server(engine, "/slow_down", {"forward_sleep_time": None})


class TestSGLangPartial(PartialRolloutChecks):
    name = "sglang"
    abort_path = "abort_request"
    sync = SGLangWeightSync
    state = staticmethod(sharpened_state)

    @pytest.fixture
    def hold(self) -> SlowedForwards:
        return SlowedForwards()

    @pytest.fixture
    def server(self, sglang_server: SGLangRolloutEngine) -> ServerProcess:
        return sglang_server.servers[0]  # the attached engine has none of its own

    def served_as(self, engine: SGLangRolloutEngine) -> str:
        return re.escape(engine.urls[0])  # an attached server is named by its URL
