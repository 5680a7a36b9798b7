"""hf, vllm and sglang on ONE tiny checkpoint: identical greedy tokens, log-probs that agree.

Each server engine also has its own parity test against ``hf`` in its test directory; this one
puts all three side by side on the same checkpoint and prompts, as users compare them. The
servers run one after the other (two servers do not fit 2 shared cores well). Skipped, with the
reason, when an engine's environment is not built (``rlctl engines install``).

Tolerance: fp32 on every side. vLLM and transformers agree to ~4e-6 (docs/engines.md), SGLang's
torch-native path to ~2e-5 (docs/sglang.md); the test asserts 1e-4 for each pair.
"""

from __future__ import annotations

import time

import pytest

from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.contract import Generation, RolloutEngineSpec
from rlctl.engines.rollout.server.engine_envs import built_env_python
from rlctl.testing.server_checkpoint import (
    PARITY_PROMPTS,
    save_server_checkpoint,
    server_tiny_recipe,
)

LOG_PROB_ATOL = 1e-4
MAX_NEW_TOKENS = 12

# heavy: a vLLM and an SGLang server again; each engine's own module compares it with hf.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        built_env_python("vllm") is None or built_env_python("sglang") is None,
        reason="needs both engine envs: run rlctl engines install vllm sglang",
    ),
]


def _greedy(backend: str, checkpoint: str, **options: object) -> list[Generation]:
    from rlctl.registry import get_registry

    engine_cls = get_registry().load("rollout_engine", backend)
    loaded = validate_recipe(server_tiny_recipe(backend, checkpoint, **options))
    engine = engine_cls(RolloutEngineSpec.from_loaded(loaded))
    started = time.monotonic()
    engine.load()
    try:
        print(f"\n{backend}: ready in {time.monotonic() - started:.1f} s")
        return engine.generate_batch(PARITY_PROMPTS, max_new_tokens=MAX_NEW_TOKENS, temperature=0.0)
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def _max_diff(a: list[Generation], b: list[Generation]) -> float:
    return max(
        abs(x - y)
        for g, h in zip(a, b, strict=True)
        for x, y in zip(g.log_probs, h.log_probs, strict=True)
    )


def test_hf_vllm_sglang_greedy_tokens_identical_and_log_probs_close(tmp_path):
    checkpoint = str(save_server_checkpoint(tmp_path / "tiny"))
    hf = _greedy("hf", checkpoint)
    vllm = _greedy("vllm", checkpoint, python=built_env_python("vllm"), startup_timeout_s=300)
    sglang = _greedy("sglang", checkpoint, python=built_env_python("sglang"), startup_timeout_s=300)

    tokens = [g.token_ids for g in hf]
    assert len({t for row in tokens for t in row}) > 3  # a sharp model: not one token repeated
    assert [g.token_ids for g in vllm] == tokens
    assert [g.token_ids for g in sglang] == tokens
    diffs = {
        "vllm-hf": _max_diff(vllm, hf),
        "sglang-hf": _max_diff(sglang, hf),
        "vllm-sglang": _max_diff(vllm, sglang),
    }
    print("greedy log-prob max |diff|: " + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))
    assert all(v < LOG_PROB_ATOL for v in diffs.values()), diffs
