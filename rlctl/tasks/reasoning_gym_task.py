"""``reasoning_gym``: reasoning tasks with verifiers, generated procedurally from a seed.

`reasoning-gym <https://pypi.org/project/reasoning-gym/>`_ (``pip install "rlctl[real]"``)
has ~100 generators (``chain_sum``, ``basic_arithmetic``, ``gsm_symbolic``, ``countdown``...);
item ``i`` of a generator seeded ``s`` is drawn from ``random.Random(s + i)``, and each
generator scores an answer with its own ``score_answer`` (the ``reasoning_gym`` reward).

Two splits, by seed, that never share a question:

* ``val`` (held out): the first ``held_out`` *distinct* questions of the generator seeded
  ``VAL_BASE + run.seed * SEED_STRIDE``; the same prompts in the same order on every call, so
  every evaluation of a run (and ``rlctl eval`` of any model) scores the same prompts;
* ``train``: the generator seeded ``TRAIN_BASE + run.seed * SEED_STRIDE``, epoch ``e`` index
  ``i`` at item ``e * epoch_size + i``; a question that is also a held-out one (small task
  spaces repeat: 2-digit sums have ~16k distinct questions) is replaced by the item
  ``REDRAW_STRIDE`` further on, until it is not. The seed ranges of the two splits are
  disjoint, and the check by question text makes the guarantee exact.

Each prompt is one user message (after an optional system message) that the chat template
formats: ``template`` with ``{question}`` and the item's metadata fields (``chain_sum``:
``{expression}``, ``{num_terms}``...).
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from pydantic import BaseModel, PositiveInt, field_validator, model_validator

from rlctl.config.strict import STRICT_CONFIG
from rlctl.tasks.prompt import Prompt

SEED_STRIDE = 1_000_000_000
TRAIN_BASE = 0
VAL_BASE = 500_000_000
REDRAW_STRIDE = 10_000_019  # a prime: redraws do not fall back onto the item's own stride
MAX_REDRAWS = 1000
REAL_EXTRA = 'pip install "rlctl[real]"'


def _reasoning_gym() -> Any:
    try:
        import reasoning_gym
    except ImportError:
        raise ImportError(
            f"the reasoning_gym task needs the reasoning-gym package: {REAL_EXTRA}") from None
    return reasoning_gym


class ReasoningGymOptions(BaseModel):
    """Options of ``reasoning_gym`` (``[data.task_options]``)."""

    model_config = STRICT_CONFIG

    dataset: str
    """reasoning-gym generator name (``chain_sum``, ``basic_arithmetic``, ``gsm_symbolic``...)."""
    config: dict[str, Any] = {}
    """The generator's own options (its config class' fields, except ``seed`` and ``size``)."""
    template: str = "{question}"
    """The user message: ``{question}`` and the item's metadata fields are filled in."""
    system_prompt: str | None = None
    """A system message before the question (``None``: the chat template's default)."""
    held_out: PositiveInt = 64
    """Questions in the held-out (``val``) split; none of them is ever a training prompt."""
    epoch_size: PositiveInt = 100_000
    """Training prompts per epoch (epochs only move the stream; prompts are drawn fresh)."""

    @field_validator("config")
    @classmethod
    def _no_seed_or_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        given = sorted({"seed", "size"} & set(value))
        if given:
            raise ValueError(f"{', '.join(given)} in config: the splits set them (run.seed, "
                             "held_out, epoch_size); remove them")
        return value

    @field_validator("template")
    @classmethod
    def _template_fields(cls, value: str) -> str:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        if "answer" in fields:
            raise ValueError("{answer} in template would give the answer away")
        return value

    @model_validator(mode="after")
    def _known_dataset(self) -> ReasoningGymOptions:
        try:
            rg = _reasoning_gym()
        except ImportError as exc:  # a config problem (exit 2), not a traceback
            raise ValueError(str(exc)) from None
        known = rg.factory.DATASETS
        if self.dataset not in known:
            from rlctl.config.problems import did_you_mean

            guess = did_you_mean(self.dataset, list(known))
            raise ValueError(f"unknown reasoning-gym dataset {self.dataset!r}"
                             + (f"; did you mean {guess!r}?" if guess else ""))
        _check_config_types(self.dataset, known[self.dataset][1], self.config)
        try:
            rg.create_dataset(self.dataset, seed=0, size=1, **self.config)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ValueError(f"config of {self.dataset!r}: {exc}") from None
        return self


def _check_config_types(dataset: str, config_cls: type, config: dict[str, Any]) -> None:
    """Each key and value against the generator's config dataclass (which takes any value: a
    table where a flag belongs would reach the generator unchecked). Raises pydantic's own
    error, located at ``config.<key>``, so the report names the key."""
    import typing

    from pydantic import ConfigDict, ValidationError, create_model
    from pydantic_core import PydanticCustomError

    from rlctl.config.problems import did_you_mean

    hints = typing.get_type_hints(config_cls)
    options = sorted(set(hints) - {"seed", "size"})
    unknown = [{"type": PydanticCustomError(
        "unknown_option", "{dataset} has no option '{key}'",
        {"dataset": dataset, "key": key,
         "fix": (f"did you mean {guess!r}?" if (guess := did_you_mean(key, options))
                 else f"its options: {', '.join(options)}")}),
        "loc": ("config", key), "input": value} for key, value in config.items()
        if key not in hints]
    if unknown:
        raise ValidationError.from_exception_data(f"{dataset} config", unknown)
    # Some generators' hints disagree with their own defaults (rearc: ``diff_ub: int = 0.2``):
    # a value of its default's kind is accepted as the generator accepts it; the hint judges
    # the rest (and fields without a default).
    defaults = _defaults(config_cls)
    check = {k: v for k, v in config.items()
             if k not in defaults or _kind(v) != _kind(defaults[k])}
    fields: dict[str, Any] = {k: (hints[k], None) for k in check}
    allow = ConfigDict(arbitrary_types_allowed=True)  # its own classes too
    typed = create_model(f"{dataset}_config", __config__=allow, **fields)
    create_model(f"{dataset}_options", config=(typed, ...)).model_validate({"config": check})


def _defaults(config_cls: type) -> dict[str, Any]:
    """The dataclass's default values (fields whose default is ``None`` left out)."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(config_cls):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        if value is not None:
            out[f.name] = value
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "flag"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


class ReasoningGymTask:
    """A :class:`~rlctl.tasks.prompt.PromptSource` over one reasoning-gym generator."""

    def __init__(self, options: ReasoningGymOptions, *, seed: int = 0,
                 split: str = "train") -> None:
        if split not in ("train", "val"):
            raise ValueError(f"reasoning_gym: unknown split {split!r} (train or val)")
        self.options = options
        self.seed = seed
        self.split = split
        self.name = f"reasoning_gym/{options.dataset}"
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        return self.options.held_out if self.split == "val" else self.options.epoch_size

    # ------------------------------------------------------------------ items
    def _generator(self, base: int, size: int) -> Any:
        rg = _reasoning_gym()
        return rg.create_dataset(self.options.dataset, seed=base + self.seed * SEED_STRIDE,
                                 size=size, **self.options.config)

    @cached_property
    def held_out_items(self) -> list[dict[str, Any]]:
        """The held-out split's items: the first ``held_out`` distinct questions."""
        want = self.options.held_out
        scan = want * 20
        gen = self._generator(VAL_BASE, scan)
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i in range(scan):
            item = gen[i]
            if item["question"] not in seen:
                seen.add(item["question"])
                items.append(item)
                if len(items) == want:
                    return items
        raise ValueError(
            f"reasoning_gym {self.options.dataset!r}: only {len(items)} distinct questions in "
            f"{scan} items, fewer than held_out = {want}; lower held_out or widen the config")

    @cached_property
    def _held_out_questions(self) -> frozenset[str]:
        return frozenset(item["question"] for item in self.held_out_items)

    @cached_property
    def _train_generator(self) -> Any:
        # size bounds nothing we read (items are drawn by index); it is the generator's own
        return self._generator(TRAIN_BASE, self.options.epoch_size)

    def train_item(self, epoch: int, index: int) -> dict[str, Any]:
        """Training item ``index`` of ``epoch``: never a held-out question."""
        at = epoch * self.options.epoch_size + index
        for _ in range(MAX_REDRAWS):
            item = self._train_generator[at]
            if item["question"] not in self._held_out_questions:
                return item
            at += REDRAW_STRIDE
        raise ValueError(f"reasoning_gym {self.options.dataset!r}: {MAX_REDRAWS} redraws of "
                         f"training item {index} all hit held-out questions")

    # ------------------------------------------------------------------ prompts
    def prompt_at(self, epoch: int, index: int) -> Prompt:
        """The ``index``-th prompt of ``epoch`` (a pure function of seed and split)."""
        if self.split == "val":
            item = self.held_out_items[index % len(self.held_out_items)]
        else:
            item = self.train_item(epoch, index)
        return self.to_prompt(item, {"epoch": epoch, "index": index, "split": self.split})

    def to_prompt(self, item: dict[str, Any], extra: dict[str, Any]) -> Prompt:
        metadata = item.get("metadata") or {}
        fields = {k: v for k, v in metadata.items() if isinstance(k, str)}
        try:
            text = self.options.template.format(**{**fields, "question": item["question"]})
        except (KeyError, IndexError) as exc:
            raise ValueError(
                f"[data.task_options] template names {exc} , which {self.options.dataset!r} "
                f"items do not have (they have question and {', '.join(sorted(fields))})"
            ) from None
        messages = [{"role": "user", "content": text}]
        if self.options.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.options.system_prompt})
        # JSON round trip: the ground truth travels as JSON (tuples become lists, the rest str)
        entry = json.loads(json.dumps(
            {"question": item["question"], "answer": item["answer"], "metadata": metadata},
            default=str))
        return Prompt(
            messages=messages,
            ground_truth={"ground_truth": str(item["answer"]),
                          "reasoning_gym": {"dataset": self.options.dataset, "entry": entry}},
            data_source=self.name,
            extra=extra,
        )

    def __iter__(self) -> Iterator[Prompt]:
        while True:
            if self.position >= len(self):
                self.epoch += 1
                self.position = 0
            prompt = self.prompt_at(self.epoch, self.position)
            self.position += 1
            yield prompt

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def reasoning_gym_task(
    options: ReasoningGymOptions, *, seed: int = 0, split: str = "train"
) -> ReasoningGymTask:
    """A reasoning-gym generator as a prompt stream (``split``: ``train`` or ``val``)."""
    return ReasoningGymTask(options, seed=seed, split=split)
