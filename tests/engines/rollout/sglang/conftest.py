"""sglang engine tests. Helpers live in ``sglang_env.py`` (imported as a plain module by the tests).

The real-server tests are skipped unless SGLang's own environment is built
(``rlctl engines install sglang``); see ``sglang_env.py``. One SGLang server serves the package
(``sglang_server``, :mod:`tests.engines.rollout.server.shared_server`): ``test_sglang_engine``
drives it as its owner, ``test_sglang_partial`` attaches an engine of its own to it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec
from rlctl.engines.rollout.sglang.engine import SGLangRolloutEngine
from rlctl.testing.server_checkpoint import save_server_checkpoint
from tests.engines.rollout.server.shared_server import order_around_the_shared_server
from tests.engines.rollout.sglang.sglang_env import SGLANG_PYTHON, tiny_recipe

PACKAGE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order_around_the_shared_server(items, PACKAGE, "sglang_server")


@pytest.fixture(scope="package")
def checkpoint(tmp_path_factory) -> Path:
    """The tiny model (sharpened, seed 0) and tokenizer saved with ``save_pretrained``."""
    return save_server_checkpoint(tmp_path_factory.mktemp("tiny-sglang"))


@pytest.fixture(scope="package")
def sglang_server(checkpoint):
    """The package's SGLang server and the engine that owns it (20 s to start on an idle
    2-core machine, minutes under load). Its metrics, the decoded-token counter updated at
    every decode step, are what the partial-rollout checks wait on; the test marked
    ``kills_shared_server`` ends it, the teardown otherwise."""
    recipe = tiny_recipe(str(checkpoint), python=SGLANG_PYTHON, startup_timeout_s=400,
                         extra_args=["--enable-metrics", "--decode-log-interval", "1"])
    e = SGLangRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(recipe)))
    started = time.monotonic()
    e.load()
    print(f"\nsglang server up (health_generate + warm-up) in {time.monotonic() - started:.1f} s")
    yield e
    e.close()
