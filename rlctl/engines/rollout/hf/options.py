"""Options of the ``hf`` rollout engine (``[engines.rollout.options]``); no torch import."""

from __future__ import annotations

from pydantic import PositiveInt

from rlctl.config.strict import RolloutEngineOptions


class HFRolloutOptions(RolloutEngineOptions):
    """How the transformers-``generate`` rollout engine batches requests."""

    generation_batch_size: PositiveInt = 1024
    """Most sequences per ``generate`` call; bigger batches are split."""
    num_threads: int | None = None
    """torch intra-op threads while generating on CPU; ``None`` keeps torch's setting."""
    ignore_eos: bool = False
    """Generate ``max_new_tokens`` tokens even after an eos (throughput tests, benchmarks)."""
    share_prompts: bool = True
    """Prefill each distinct prompt of a batch once and copy its KV cache to every request of
    it (a group's n samples; vLLM and SGLang do this with their prefix caches): the same
    tokens up to float summation order in the logits."""
