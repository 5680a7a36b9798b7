"""A training step with a token budget and packed sequences gives the padded step's numbers.

Step 1 samples with the same initial weights, so its rollouts (and scores) are identical;
its loss, gradient norm and entropy differ only by float rounding (other shapes): relative
1e-5. Later steps sample with weights that differ in the last bits, so they are not compared.
"""

from __future__ import annotations

import math

PACKED = {"packing": True, "max_tokens_per_micro_batch": 64,
          "log_prob_max_tokens_per_micro_batch": 128}


def test_packed_step_equals_the_padded_step(make_recipe, run):
    common = {"data": {"task": "count_digits", "max_prompt_tokens": 16},
              "schedule": {"total_steps": 2}}
    padded = run(make_recipe(run={"name": "padded"}, **common))
    packed = run(make_recipe(run={"name": "packed"}, engines={"train": {
        "backend": "fsdp", "ranks": 1, "micro_batch_size": 16, "options": PACKED}}, **common))
    a, b = padded[0], packed[0]
    assert a["critic/score/mean"] == b["critic/score/mean"]  # the same rollouts
    for key in ("actor/pg_loss", "actor/loss", "actor/grad_norm", "actor/entropy",
                "training/rollout_probs_diff"):
        assert math.isclose(a[key], b[key], rel_tol=1e-5, abs_tol=1e-9), (key, a[key], b[key])
    assert len(packed) == 2 and math.isfinite(packed[1]["actor/loss"])
