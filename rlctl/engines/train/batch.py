"""The padded batch layout every model engine consumes.

For B samples with prompts of lengths p_i and responses of lengths r_i::

    P = max p_i, R = max r_i, L = P + R

    input_ids      [B, L]  prompt LEFT-padded to P, then response RIGHT-padded to R
    attention_mask [B, L]  1 on real tokens, 0 on padding
    position_ids   [B, L]  0, 1, 2... over real tokens (padding gets 0)
    responses      [B, R]  the response tokens, right-padded with pad_id
    response_mask  [B, R]  1 on real response tokens

    row i:  [pad pad p p p | r r r pad]
             <---- P ----->  <-- R -->

Because every prompt ends at column P-1, the logits that predict ``responses[:, t]`` sit
at column ``P - 1 + t`` for every row: per-token outputs of engines (log-probs, entropy,
values) are ``[B, R]`` tensors aligned with ``responses`` and masked by ``response_mask``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class ModelBatch:
    """Padded prompt+response tokens of B samples (layout in the module docstring)."""

    input_ids: torch.Tensor
    """[B, L] long."""
    attention_mask: torch.Tensor
    """[B, L] long, 1 = real token."""
    position_ids: torch.Tensor
    """[B, L] long."""
    responses: torch.Tensor
    """[B, R] long."""
    response_mask: torch.Tensor
    """[B, R] float32, 1.0 = real response token."""

    @classmethod
    def from_samples(
        cls,
        prompt_ids: Sequence[torch.Tensor | Sequence[int]],
        response_ids: Sequence[torch.Tensor | Sequence[int]],
        pad_id: int,
    ) -> ModelBatch:
        """Pad B prompts (left) and responses (right) into one batch."""
        if len(prompt_ids) != len(response_ids):
            raise ValueError(
                f"{len(prompt_ids)} prompts but {len(response_ids)} responses: one response "
                "per prompt is expected (repeat a prompt for each of its samples)"
            )
        if not prompt_ids:
            raise ValueError("cannot build a ModelBatch from zero samples")
        prompts = [torch.as_tensor(p, dtype=torch.long).reshape(-1) for p in prompt_ids]
        responses = [torch.as_tensor(r, dtype=torch.long).reshape(-1) for r in response_ids]
        return cls.from_values(
            torch.cat(prompts), [p.numel() for p in prompts],
            torch.cat(responses), [r.numel() for r in responses], pad_id,
        )

    @classmethod
    def from_values(
        cls,
        prompt_values: torch.Tensor,
        prompt_lengths: Sequence[int],
        response_values: torch.Tensor,
        response_lengths: Sequence[int],
        pad_id: int,
    ) -> ModelBatch:
        """The batch of B samples given as all prompts' tokens back to back (``[sum p_i]``)
        and all responses' (``[sum r_i]``) with their lengths: the data plane's jagged form.
        Built with two masked copies, no loop over rows."""
        if len(prompt_lengths) != len(response_lengths):
            raise ValueError(
                f"{len(prompt_lengths)} prompts but {len(response_lengths)} responses: one "
                "response per prompt is expected (repeat a prompt for each of its samples)"
            )
        if not len(prompt_lengths):
            raise ValueError("cannot build a ModelBatch from zero samples")
        p_len = torch.as_tensor(list(prompt_lengths), dtype=torch.long)[:, None]  # [B, 1]
        r_len = torch.as_tensor(list(response_lengths), dtype=torch.long)[:, None]
        if bool((p_len == 0).any()):
            raise ValueError("a prompt is empty: every sample needs at least one prompt token")
        width_p = int(p_len.max())
        width_r = max(int(r_len.max()), 1)
        cols = torch.arange(width_p + width_r)[None, :]  # [1, L]
        in_prompt = (cols < width_p) & (cols >= width_p - p_len)  # [B, L]
        in_response = (cols >= width_p) & (cols < width_p + r_len)
        input_ids = torch.full(in_prompt.shape, pad_id, dtype=torch.long)
        # The True cells of a mask, row by row, are the samples' tokens in order.
        input_ids[in_prompt] = prompt_values.to(torch.long)
        input_ids[in_response] = response_values.to(torch.long)
        attention_mask = (in_prompt | in_response).long()
        position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        return cls(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            responses=input_ids[:, width_p:].clone(),
            response_mask=attention_mask[:, width_p:].to(torch.float32),
        )

    # ------------------------------------------------------------------ shape
    @property
    def batch_size(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def prompt_width(self) -> int:
        """P: columns of (left-padded) prompt."""
        return int(self.input_ids.shape[1] - self.responses.shape[1])

    @property
    def response_width(self) -> int:
        """R: columns of (right-padded) response."""
        return int(self.responses.shape[1])

    def __len__(self) -> int:
        return self.batch_size

    # ------------------------------------------------------------------ slicing
    def slice(self, idx: slice | torch.Tensor | Sequence[int]) -> ModelBatch:
        """Rows ``idx`` (a slice, index list or index tensor); widths P and R are kept."""
        if not isinstance(idx, slice):
            idx = torch.as_tensor(idx, dtype=torch.long)
        return ModelBatch(
            input_ids=self.input_ids[idx],
            attention_mask=self.attention_mask[idx],
            position_ids=self.position_ids[idx],
            responses=self.responses[idx],
            response_mask=self.response_mask[idx],
        )

    def split(self, micro_batch_size: int) -> list[ModelBatch]:
        """Consecutive chunks of at most ``micro_batch_size`` rows."""
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        return [
            self.slice(slice(start, start + micro_batch_size))
            for start in range(0, self.batch_size, micro_batch_size)
        ]

    def trim_prompt_padding(self) -> ModelBatch:
        """Drop prompt columns that are padding in every row (fewer columns, same outputs).

        Useful after :meth:`split`: a micro-batch of short prompts need not carry the
        padding of the longest prompt in the whole batch. R is unchanged.
        """
        prompt_mask = self.attention_mask[:, : self.prompt_width]
        used = prompt_mask.any(dim=0).nonzero()
        first = int(used[0]) if used.numel() else self.prompt_width - 1
        if first == 0:
            return self
        return ModelBatch(
            input_ids=self.input_ids[:, first:],
            attention_mask=self.attention_mask[:, first:],
            position_ids=self.position_ids[:, first:],
            responses=self.responses,
            response_mask=self.response_mask,
        )

    def trim_response_padding(self) -> ModelBatch:
        """Drop response columns that are padding in every row (R shrinks to the longest
        response, at least 1; per-token outputs then need padding back to the old R)."""
        real = self.attention_mask[:, self.prompt_width :]
        used = real.any(dim=0).nonzero()
        width = max(int(used[-1]) + 1 if used.numel() else 1, 1)
        if width == self.response_width:
            return self
        cut = self.prompt_width + width
        return ModelBatch(
            input_ids=self.input_ids[:, :cut],
            attention_mask=self.attention_mask[:, :cut],
            position_ids=self.position_ids[:, :cut],
            responses=self.responses[:, :width],
            response_mask=self.response_mask[:, :width],
        )

    def to(self, device: torch.device | str) -> ModelBatch:
        return ModelBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            position_ids=self.position_ids.to(device),
            responses=self.responses.to(device),
            response_mask=self.response_mask.to(device),
        )

    @staticmethod
    def cat(batches: Sequence[ModelBatch], pad_id: int) -> ModelBatch:
        """Concatenate batches (re-padding to the widest P and R)."""
        prompts, responses = [], []
        for b in batches:
            p_width = b.prompt_width
            for i in range(b.batch_size):
                mask = b.attention_mask[i]
                prompts.append(b.input_ids[i, :p_width][mask[:p_width].bool()])
                responses.append(b.responses[i][b.response_mask[i].bool()])
        return ModelBatch.from_samples(prompts, responses, pad_id)
