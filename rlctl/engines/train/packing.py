"""Token-budget micro-batches and packed (padding-free) forwards over a :class:`ModelBatch`.

Two independent ways to spend a forward on real tokens instead of padding:

* **Token budget** (verl's ``use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``):
  :func:`token_budget_groups` cuts a batch into micro-batches of at most ``budget`` tokens,
  longest samples first, so similar lengths share a micro-batch and a micro-batch of short
  samples holds more of them. Tokens are what the forward processes: ``rows x (P + R)`` of the
  micro-batch when padded, the sum of its samples' lengths when packed.
* **Packing**: :func:`pack` lays a micro-batch's samples end to end in ONE row, no padding at
  all; position ids restart at 0 for every sample (rotary positions are per sample) and the
  attention is per sample: :mod:`rlctl.engines.train.varlen_attention` (transformers alone
  would build a block-diagonal mask from the position ids, at ``T^2`` cost per row). No sample
  attends to another, so every token's logits are those of its unpacked forward. Only the
  logits that predict response tokens are computed (``logits_to_keep`` as indices).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlctl.engines.train.batch import ModelBatch


def token_budget_groups(
    prompt_lens: Sequence[int], response_lens: Sequence[int], budget: int, *, packed: bool
) -> list[torch.Tensor]:
    """Row indices of each micro-batch: at most ``budget`` tokens each (see the module doc).

    Rows are taken longest first and a micro-batch is closed when the next row would take it
    over the budget; a single row longer than the budget gets a micro-batch of its own (the
    recipe check keeps the budget above the longest possible sample, so this is a fallback).
    """
    if budget < 1:
        raise ValueError(f"a token budget must be >= 1, got {budget}")
    order = sorted(range(len(prompt_lens)),
                   key=lambda i: (-(prompt_lens[i] + response_lens[i]), i))
    groups: list[list[int]] = []
    current: list[int] = []
    total = width_p = width_r = 0  # of ``current``: tokens, widest prompt, widest response
    for i in order:
        p, r = prompt_lens[i], response_lens[i]
        if packed:
            cost = total + p + r
        else:  # every row is as wide as the widest prompt plus the widest response
            cost = (len(current) + 1) * (max(width_p, p) + max(width_r, r))
        if current and cost > budget:
            groups.append(current)
            current, total, width_p, width_r = [], 0, 0, 0
        current.append(i)
        total, width_p, width_r = total + p + r, max(width_p, p), max(width_r, r)
    if current:
        groups.append(current)
    return [torch.tensor(sorted(g), dtype=torch.long) for g in groups]


@dataclass
class PackedBatch:
    """The samples of a :class:`ModelBatch` end to end in one row (module docstring)."""

    input_ids: torch.Tensor
    """[1, T] long: every sample's prompt then response tokens, no padding."""
    position_ids: torch.Tensor
    """[1, T] long: 0, 1, 2... restarting at every sample."""
    bounds: torch.Tensor
    """[B + 1] long: where each sample starts in the row, then T (varlen attention's
    ``cu_seq_lens``)."""
    logit_index: torch.Tensor
    """[N] long: the column whose logits (or value) predict each real response token."""
    rows: torch.Tensor
    """[N] long: the sample (row of the padded batch) of each response token."""
    cols: torch.Tensor
    """[N] long: its column in the padded ``[B, R]`` layout."""
    targets: torch.Tensor
    """[N] long: the response token ids."""
    shape: tuple[int, int]
    """``(B, R)`` of the padded batch, to scatter per-token outputs back into."""

    def to(self, device: torch.device | str) -> PackedBatch:
        moved = {k: getattr(self, k).to(device) for k in
                 ("input_ids", "position_ids", "logit_index", "rows", "cols", "targets")}
        moved["bounds"] = self.bounds  # read on the host by the attention loop
        return PackedBatch(**moved, shape=self.shape)

    def scatter(self, values: torch.Tensor) -> torch.Tensor:
        """``[N]`` per-token values -> ``[B, R]``, zero on padding (keeps the gradient)."""
        out = values.new_zeros(self.shape)
        return out.index_put((self.rows, self.cols), values)


def pack(batch: ModelBatch) -> PackedBatch:
    """Pack ``batch`` into one row. Masked response tokens (padding, or rows the caller
    zeroed) get no logit; their prompt and response tokens still run, as in the padded
    forward, so the real tokens' outputs are the same."""
    real = batch.attention_mask.bool()  # [B, L]
    lengths = real.sum(dim=1)  # [B]
    prompt_lens = real[:, : batch.prompt_width].sum(dim=1)  # [B]
    # Row-major boolean indexing keeps each row's tokens in order, rows one after another.
    input_ids = batch.input_ids[real][None]  # [1, T]
    position_ids = batch.position_ids[real][None]  # [1, T]
    ends = torch.cumsum(lengths, dim=0)  # [B]
    starts = ends - lengths  # [B] first column of each sample
    rows, cols = batch.response_mask.bool().nonzero(as_tuple=True)  # [N] each, row-major
    logit_index = starts[rows] + prompt_lens[rows] - 1 + cols  # the token before each target
    return PackedBatch(
        input_ids=input_ids,
        position_ids=position_ids,
        bounds=torch.cat([ends.new_zeros(1), ends]),
        logit_index=logit_index,
        rows=rows,
        cols=cols,
        targets=batch.responses[rows, cols],
        shape=(batch.batch_size, batch.response_width),
    )


def sample_lengths(batch: ModelBatch) -> tuple[list[int], list[int]]:
    """Real prompt and response tokens of each row (the responses' as they run: unmasked)."""
    real = batch.attention_mask.bool()
    prompts = real[:, : batch.prompt_width].sum(dim=1)
    responses = real[:, batch.prompt_width :].sum(dim=1)
    return prompts.tolist(), responses.tolist()
