"""Shared-prompt forwards: each distinct prompt of a micro-batch runs once.

A group sampler (GRPO, RLOO, DAPO...) draws n responses per prompt, and the padded layout
(:mod:`rlctl.engines.train.batch`) makes every one of the n rows recompute its prompt. With
causal attention a prompt's keys and values do not depend on what follows it, so the
distinct prompts can run once, their KV cache be gathered for every row, and a second
forward run the responses only:

    prompts   [U, P]  one row per distinct prompt (U <= B), use_cache -> cache [U, ., P, .]
    cache     [B, ., P, .]  rows gathered with index_select (differentiable: a prompt's
                            gradient is the sum over its responses, as in the padded forward)
    responses [B, R-1]  tokens 0 .. R-2 read the cache and predict tokens 1 .. R-1;
                        the prompt's last position predicts token 0

The logits equal the padded forward's up to floating-point summation order (max |diff| of
the log-probs about 5e-7 in fp32, tested); the work shrinks from ``B * (P + R)`` to
``U * P + B * (R - 1)`` token positions, which for the tiny recipe (8 responses of 3 tokens
per 3-11 token prompt) is about a third. This is the "shared prefix" forward of Prefix
Grouper (Liu et al., 2025) applied per micro-batch.

It runs only where the cache path is the same model: not under gradient checkpointing
while training (transformers drops the cache of a checkpointed layer), and not for packed
rows or value models (their callers do not ask for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rlctl.engines.train.batch import ModelBatch


@dataclass(frozen=True)
class PromptGroups:
    """Which rows of a micro-batch share a prompt."""

    first: torch.Tensor
    """[U] long: one row holding each distinct prompt."""
    inverse: torch.Tensor
    """[B] long: for every row, its prompt's index into ``first``."""


def prompt_groups(mb: ModelBatch) -> PromptGroups | None:
    """The distinct prompts of ``mb`` (token ids and padding alike), or ``None`` when no two
    rows share one (then the shared forward would only add a second call)."""
    width = mb.prompt_width
    rows = torch.cat([mb.input_ids[:, :width], mb.attention_mask[:, :width]], dim=1)  # [B, 2P]
    distinct, inverse = torch.unique(rows, dim=0, return_inverse=True)
    count = int(distinct.shape[0])
    if count == mb.batch_size:
        return None
    order = torch.arange(mb.batch_size, device=inverse.device)
    first = torch.full((count,), mb.batch_size, dtype=torch.long, device=inverse.device)
    first = first.scatter_reduce(0, inverse, order, reduce="amin")  # lowest row per prompt
    return PromptGroups(first=first, inverse=inverse)


def every_row_alone(mb: ModelBatch) -> PromptGroups:
    """Groups of one row each: the shared forward's two calls without any sharing."""
    rows = torch.arange(mb.batch_size, device=mb.input_ids.device)
    return PromptGroups(first=rows, inverse=rows)


def shared_prompt_logits(
    model: nn.Module, mb: ModelBatch, groups: PromptGroups, *, two_calls: bool = False
) -> torch.Tensor:
    """``logits [B, R, V]``: column t predicts ``mb.responses[:, t]`` (the padded forward's
    ``logits[:, P-1 : P-1+R]``). ``mb`` must be on the model's device.

    ``two_calls``: run the response forward even for one-token responses (its output then
    weighs zero). Sharded ranks need it: every rank must make the same number of forward
    calls, or FSDP's gathers and gradient reductions stop lining up.
    """
    width_p, width_r = mb.prompt_width, mb.response_width
    first, inverse = groups.first, groups.inverse
    head = model(
        input_ids=mb.input_ids[first, :width_p],  # [U, P]
        attention_mask=mb.attention_mask[first, :width_p],
        position_ids=mb.position_ids[first, :width_p],
        use_cache=True,
        logits_to_keep=1,
    )
    first_token = head.logits[inverse]  # [B, 1, V]: predicts response token 0
    if width_r == 1 and not two_calls:
        return first_token
    cache = head.cache
    cache.reorder_cache(inverse)  # [U, ...] -> [B, ...] per layer, by index_select
    end = width_p + max(width_r - 1, 1)
    rest = model(
        input_ids=mb.input_ids[:, width_p:end],  # [B, R-1] (one column when R = 1)
        attention_mask=mb.attention_mask[:, :end],  # prompt + response
        position_ids=mb.position_ids[:, width_p:end],
        cache=cache,
        use_cache=True,
    ).logits  # [B, R-1, V]: predicts response tokens 1 .. R-1
    if width_r == 1:  # the call only kept the ranks' collectives aligned
        return first_token + 0.0 * rest.sum()
    return torch.cat([first_token, rest], dim=1)
