"""TEST-ONLY: a vLLM logits processor that slows every engine step while a file says so, the
way SGLang's ``/slow_down`` testing API does (``tests/engines/rollout/sglang``).

Why: the partial-rollout tests must land a weight update while every request of a batch holds
decoded tokens and none has finished. vLLM has no bounded-step or slow-down API: its
``/pause?mode=keep`` freezes the scheduler, but letting the batch reach its first tokens took
``/resume`` then ``/pause`` again, and the tiny model decodes the whole batch (96 steps) in
about 0.3 s, so a test thread descheduled that long between the two calls lost the hold.
With this processor the server's steps take ``seconds`` each while the file :data:`GATE_ENV`
names exists (its text: the seconds); the batch's 96 steps take minutes, an abort still ends
every running request at the next step boundary with its tokens, and the logits pass through
unchanged (greedy tokens, log-probs and everything else are what vLLM computes without it).

Use: the vLLM server of ``tests/engines/rollout/vllm`` starts with this ``shim`` folder on
its ``PYTHONPATH`` and ``--logits-processors held_steps:HeldSteps`` (``conftest.py``). Runs inside
vLLM's own environment: never import it from the ``rlctl`` package or its tests.
"""

from __future__ import annotations

import os
import time

from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

GATE_ENV = "RLCTL_TEST_HELD_STEPS_FILE"
"""The environment variable naming the file that switches the slow steps on."""


class HeldSteps(LogitsProcessor):
    """Sleeps before passing the batch's logits on, while the gate file exists."""

    def __init__(self, vllm_config, device, is_pin_memory) -> None:  # vLLM's signature
        self.gate = os.environ.get(GATE_ENV)

    def is_argmax_invariant(self) -> bool:
        # False: vLLM then applies it on every step, greedy ones included (an argmax-invariant
        # processor is skipped when no request samples at random).
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        pass

    def apply(self, logits):  # logits: a torch tensor [requests, vocab]
        if self.gate:
            try:
                with open(self.gate) as gate:
                    seconds = float(gate.read() or 0)
            except FileNotFoundError:
                seconds = 0.0
            if seconds > 0:
                time.sleep(seconds)
        return logits
