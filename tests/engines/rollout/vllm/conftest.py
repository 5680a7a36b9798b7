"""vllm engine tests. Helpers live in ``vllm_env.py`` (imported as a plain module by the tests).

The real-server tests are skipped unless vLLM's own environment is built
(``rlctl engines install vllm``); see ``vllm_env.py``. One vLLM server serves the package's
modules that can share one (``vllm_server``, :mod:`tests.engines.rollout.server.shared_server`):
``test_vllm_engine`` drives it as its owner, ``test_vllm_partial`` attaches an engine of its
own to it. Modules whose server differs (``--enable-lora``, two replicas) start their own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlctl.engines.rollout.vllm.engine import VLLMRolloutEngine
from rlctl.engines.rollout.vllm.server import WORKER_EXTENSION_DIR
from rlctl.testing.server_checkpoint import save_server_checkpoint
from tests.engines.rollout.server.shared_server import order_around_the_shared_server
from tests.engines.rollout.vllm.vllm_env import VLLM_PYTHON, engine_spec, tiny_recipe

PACKAGE = Path(__file__).parent
SHIM = PACKAGE / "shim"  # test-only: see its held_steps.py


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order_around_the_shared_server(items, PACKAGE, "vllm_server")


@pytest.fixture(scope="package")
def checkpoint(tmp_path_factory) -> Path:
    """The tiny model (sharpened, seed 0) and tokenizer saved with ``save_pretrained``."""
    return save_server_checkpoint(tmp_path_factory.mktemp("tiny-vllm"))


@pytest.fixture(scope="package")
def held_steps_gate(tmp_path_factory) -> Path:
    """The file that slows the package server's steps while it exists (``held_steps.py``)."""
    return tmp_path_factory.mktemp("held-steps") / "seconds-per-step"


@pytest.fixture(scope="package")
def vllm_server(checkpoint, held_steps_gate):
    """The package's vLLM server and the engine that owns it (30-60 s to start on 2 shared
    cores, minutes under load). It logs stats: the partial-rollout checks read its
    Prometheus ``/metrics``; it runs the test-only ``held_steps`` logits processor (the
    partial-rollout checks' hold: logits unchanged, steps slowed only while
    ``held_steps_gate`` exists). The test marked ``kills_shared_server`` ends it, the
    teardown otherwise."""
    env = {"PYTHONPATH": f"{WORKER_EXTENSION_DIR}{os.pathsep}{SHIM}",
           "RLCTL_TEST_HELD_STEPS_FILE": str(held_steps_gate)}
    recipe = tiny_recipe(str(checkpoint), python=VLLM_PYTHON, startup_timeout_s=400,
                         log_stats=True, env=env, allow_loader_env=True,  # test-only code
                         extra_args=["--logits-processors", "held_steps:HeldSteps"])
    e = VLLMRolloutEngine(engine_spec(recipe))
    started = time.monotonic()
    e.load()
    print(f"\nvllm server up (health + warm-up) in {time.monotonic() - started:.1f} s")
    yield e
    e.close()
