"""A discriminative reward model: an HF sequence-classification checkpoint scores each sample.

``[[rewards]] name = "reward_model"`` (registration kind ``model``): it runs in the reward
worker group (``[engines.reward]``), batched, never in the rollout workers. It reads the
policy's own tokens, ``prompt_ids + response_ids`` (eos included when the model stopped),
so the checkpoint must share the policy's tokenizer and chat template; a vocabulary smaller
than the policy's token ids is refused.

The score is the checkpoint's logit ``label`` at the last token that is not the pad token,
which is how ``AutoModelForSequenceClassification`` pools (e.g. ``Qwen3ForSequenceClassification``):
batches are right-padded, so a sample scores exactly as it would alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, PositiveInt

from rlctl.config.strict import STRICT_CONFIG, LocalDir

if TYPE_CHECKING:
    from rlctl.rewards.base import RewardInput


class RewardModelOptions(BaseModel):
    """Options of ``reward_model``."""

    model_config = STRICT_CONFIG

    path: LocalDir = Field(min_length=1)
    """Local directory of an HF sequence-classification checkpoint (never downloaded)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """Parameter dtype of the reward model."""
    micro_batch_size: PositiveInt = 16
    """Sequences per forward pass."""
    label: int = Field(0, ge=0)
    """Which output logit is the score (0 for the usual one-logit reward model)."""
    trust_remote_code: bool = False
    """Allow model code from the checkpoint (off: configs never execute code)."""


class SequenceClassifierReward:
    """Scores batches of samples with a sequence-classification model."""

    def __init__(self, options: RewardModelOptions, *, device: str = "cpu") -> None:
        from pathlib import Path

        import torch
        from transformers import AutoModelForSequenceClassification

        path = Path(options.path).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"reward model path {options.path!r} is not a local directory; rlctl never "
                "downloads weights: download the checkpoint first and give its directory")
        self.options = options
        self.device = torch.device(device)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16}[options.dtype]
        model = AutoModelForSequenceClassification.from_pretrained(
            path, local_files_only=True, dtype=dtype,
            trust_remote_code=options.trust_remote_code)
        self.model = model.to(self.device).eval().requires_grad_(False)
        config = self.model.config
        if options.label >= config.num_labels:
            raise ValueError(f"reward model {options.path}: label {options.label} but the "
                             f"checkpoint has {config.num_labels} output(s)")
        text = config.get_text_config()
        self.pad_id = text.pad_token_id
        self.vocab_size = int(text.vocab_size)

    def __call__(self, samples: list[RewardInput]) -> list[float]:
        """One score per sample, in order."""
        import torch

        seqs = [list(s.prompt_ids) + list(s.response_ids) for s in samples]
        top = max((max(s) for s in seqs if s), default=-1)
        if top >= self.vocab_size:
            raise ValueError(
                f"reward model {self.options.path}: token id {top} is outside its vocabulary "
                f"of {self.vocab_size}; it must share the policy's tokenizer")
        # Without a pad token HF pools at the last position: one sequence per forward.
        size = self.options.micro_batch_size if self.pad_id is not None else 1
        # Longest first, so each micro-batch holds sequences of similar length.
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        scores = [0.0] * len(seqs)
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            width = max(len(seqs[i]) for i in chunk)
            ids = torch.full((len(chunk), width), self.pad_id or 0, dtype=torch.long)  # [b, L]
            mask = torch.zeros((len(chunk), width), dtype=torch.long)  # [b, L]
            for row, i in enumerate(chunk):  # right padding: real tokens never attend to pads
                ids[row, : len(seqs[i])] = torch.as_tensor(seqs[i], dtype=torch.long)
                mask[row, : len(seqs[i])] = 1
            with torch.no_grad():
                logits = self.model(input_ids=ids.to(self.device),
                                    attention_mask=mask.to(self.device)).logits  # [b, labels]
            for row, i in enumerate(chunk):
                scores[i] = float(logits[row, self.options.label].float())
        return scores
