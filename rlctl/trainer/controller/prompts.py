"""Feeding prompts into the data plane: the first phase of a step.

The controller tokenises a batch of prompts and puts them into the prompt partition
(``prompts/<partition>``) under fresh uids; rollout workers read them back by key. The
controller keeps only the resulting :class:`KVBatchMeta`.

The sync trainer feeds the next step's prompts while this step's ranks train
(:meth:`PromptFeeder.prefetch`), so a step's generation starts without the tokenising and
the put. A batch fed ahead is not yet consumed: the feeder's state (what a checkpoint
saves) stays the one before it, and a request that differs from what was fed ahead takes it
back (its keys cleared, the source rewound) and feeds what was asked.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rlctl.config.recipe import Recipe
from rlctl.protocol.kv import KVBatchMeta, new_uid


def prompt_partition(partition: str) -> str:
    return f"prompts-{partition}"


def open_prompt_source(recipe: Recipe, *, split: str, task_options: BaseModel | None) -> Any:
    """The recipe's prompt stream for ``split`` (``train`` or ``val``): a task or files.

    ``task_options``: the task's ``[data.task_options]`` as validated when the recipe was
    loaded (``None`` where the task registered no option model).
    """
    from rlctl.registry import get_registry

    data = recipe.data
    if data.task is not None:
        # a task without an option model has an empty table (checked at load)
        options = task_options if task_options is not None else dict(data.task_options)
        return get_registry().load("task", data.task)(options, seed=recipe.run.seed, split=split)
    from rlctl.tasks.file_source import FilePromptSource

    path = data.train if split == "train" else data.val
    if path is None:
        raise ValueError(f"[data] {split} is not set: give a prompt file or a [data] task")
    return FilePromptSource(
        path, prompt_key=data.prompt_key, answer_key=data.answer_key, seed=recipe.run.seed,
        shuffle=data.shuffle and split == "train", what=f"[data] {split}",
    )


@dataclass(frozen=True)
class _FedAhead:
    """A batch :meth:`PromptFeeder.prefetch` put for a later :meth:`PromptFeeder.next_batch`."""

    request: tuple[int, str, int, int]  # (count, partition, global_step, n)
    meta: KVBatchMeta
    state_before: dict[str, Any]  # the source's state before it was drawn


class PromptFeeder:
    """Draws prompts from the recipe's source and puts them into the data plane."""

    def __init__(
        self, recipe: Recipe, tokenizer: Any, plane: Any, *, split: str = "train",
        task_options: BaseModel | None, tool_schemas: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """``task_options``: the task's options as validated at load (``None`` without an
        option model); ``tool_schemas``: the recipe's tools' descriptions the chat template
        renders (``None`` without tools; the session builds them)."""
        self.recipe = recipe
        self.tokenizer = tokenizer
        self.plane = plane
        self.split = split
        self.source = open_prompt_source(recipe, split=split, task_options=task_options)
        self._iter = iter(self.source)
        self.tool_schemas = list(tool_schemas) if tool_schemas is not None else None
        self._ahead: _FedAhead | None = None

    def state_dict(self) -> dict[str, Any]:
        """The source's state after the batches handed out (a batch fed ahead is not)."""
        if self._ahead is not None:
            return copy.deepcopy(self._ahead.state_before)
        return self.source.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._take_back()
        self.source.load_state_dict(state)
        self._iter = iter(self.source)

    def prefetch(self, count: int, *, partition: str, global_step: int, n: int) -> None:
        """Feed the batch a later ``next_batch(count, partition=..., global_step=..., n=...)``
        will ask for, now (while workers compute); a no-op if one is fed ahead already."""
        if self._ahead is not None:
            return
        before = copy.deepcopy(self.source.state_dict())
        meta = self._feed(count, partition=partition, global_step=global_step, n=n)
        self._ahead = _FedAhead((count, partition, global_step, n), meta, before)

    def group_size(self, prompt: Any, default: int) -> int:
        """Sessions for ``prompt``: the first plugin's ``choose_group_size`` answer, else the
        prompt's ``n``, else ``default``."""
        from rlctl.registry import get_registry

        chosen, who = None, "the task"
        for outcome in get_registry().call_each(
                "choose_group_size", recipe=self.recipe, prompt=prompt, split=self.split,
                default=default):
            if outcome.error is not None:
                raise RuntimeError(f"{outcome.describe()} while choosing the group size of a "
                                   f"prompt of {prompt.data_source!r}") from outcome.error
            if outcome.result is not None:
                chosen, who = outcome.result, f"choose_group_size of plugin {outcome.plugin}"
                break
        if chosen is None:
            chosen = prompt.n if prompt.n is not None else default
        if not isinstance(chosen, int) or isinstance(chosen, bool) or chosen < 1:
            raise ValueError(f"{who} answered {chosen!r} for a prompt of "
                             f"{prompt.data_source!r}: it must be a positive int (or None)")
        return chosen

    def next_batch(self, count: int, *, partition: str, global_step: int, n: int) -> KVBatchMeta:
        """Put ``count`` prompts into the data plane; tag ``n`` = sessions wanted per uid.

        The batch fed ahead when it is the one asked for (already in the data plane)."""
        ahead = self._ahead
        if ahead is not None and ahead.request == (count, partition, global_step, n):
            self._ahead = None
            return ahead.meta
        self._take_back()
        return self._feed(count, partition=partition, global_step=global_step, n=n)

    def _take_back(self) -> None:
        """Undo a batch fed ahead: clear its prompts and rewind the source before them."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self.plane.kv_clear(list(ahead.meta.keys), ahead.meta.partition_id)
            self.source.load_state_dict(ahead.state_before)
            self._iter = iter(self.source)

    def _feed(self, count: int, *, partition: str, global_step: int, n: int) -> KVBatchMeta:
        import torch
        from tensordict import TensorDict

        from rlctl.tasks import tokenize_prompts
        from rlctl.trainer.worker.fields import from_rows

        data = self.recipe.data
        prompts = [next(self._iter) for _ in range(count)]
        ids = tokenize_prompts(
            prompts, self.tokenizer, apply_chat_template=data.apply_chat_template,
            max_prompt_tokens=data.max_prompt_tokens, tools=self.tool_schemas)
        uids = [new_uid() for _ in prompts]
        fields = TensorDict(
            {
                # [B, (P_i)] jagged: prompts are stored without padding (one tensor for
                # every prompt's ids: a tensor per prompt cost ~10 us each)
                "prompt_ids": from_rows(ids, torch.long),
            },
            batch_size=[len(uids)],
        )
        fields["ground_truth"] = [json.dumps(p.ground_truth) for p in prompts]
        fields["data_source"] = [p.data_source for p in prompts]
        # the prompt as given (text or messages): agent functions build their own requests
        fields["raw_prompt"] = [
            json.dumps(p.messages if p.messages is not None else p.text) for p in prompts]
        sizes = [self.group_size(p, n) for p in prompts]
        tags = [{"global_step": global_step, "n": k, "prompt_len": len(x)}
                for x, k in zip(ids, sizes, strict=True)]
        part = prompt_partition(partition)
        self.plane.kv_batch_put(uids, part, fields, tags)
        return KVBatchMeta(keys=tuple(uids), partition_id=part, tags=tuple(tags))
