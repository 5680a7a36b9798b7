"""Prompts from files: parquet (verl's layout), JSONL, or HF ``datasets`` directories.

Columns, whatever the format: ``prompt`` (chat messages ``list[{"role", "content"}]`` or a
plain string; the name is ``[data] prompt_key``), ``reward_model`` (a struct whose
``ground_truth`` field is the answer, or the bare answer; ``[data] answer_key``),
``data_source`` (optional string). Other columns ride along in :attr:`Prompt.extra`. Several
files are concatenated in the order given (verl's ``train_files`` list). Each epoch is a
fresh permutation seeded by ``(seed, epoch)`` when ``shuffle`` is on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rlctl.tasks.prompt import Prompt
from rlctl.tasks.readers import read_rows


class FilePromptSource:
    """A :class:`~rlctl.tasks.prompt.PromptSource` over the rows of one or more files."""

    def __init__(
        self,
        paths: str | Path | Sequence[str | Path],
        *,
        prompt_key: str = "prompt",
        answer_key: str = "reward_model",
        seed: int = 0,
        shuffle: bool = True,
        what: str = "[data] train",
    ) -> None:
        many = isinstance(paths, (list, tuple))
        self.paths = [Path(p) for p in paths] if many else [Path(paths)]  # type: ignore[arg-type]
        self.path = self.paths[0]
        self.rows: list[dict[str, Any]] = []
        self._origin: list[Path] = []  # file of each row (its default data_source)
        for path in self.paths:
            rows = read_rows(path, what=what)
            if not rows:
                raise ValueError(f"{what}: {path} has no rows")
            columns = sorted({k for row in rows for k in row})
            for key, option in ((prompt_key, "prompt_key"), (answer_key, "answer_key")):
                if key not in columns:
                    raise ValueError(
                        f"{path}: no column {key!r} ([data] {option}); columns are {columns}; "
                        f"set [data] {option} to the right one")
            self.rows += rows
            self._origin += [path] * len(rows)
        self.prompt_key, self.answer_key = prompt_key, answer_key
        self.seed, self.shuffle = seed, shuffle
        self.epoch = 0
        self.position = 0
        self._order: list[int] = self._order_of(0)

    def __len__(self) -> int:
        return len(self.rows)

    def _order_of(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(len(self.rows)))
        import numpy as np

        return np.random.default_rng([self.seed, epoch]).permutation(len(self.rows)).tolist()

    def prompt_at(self, row_index: int) -> Prompt:
        """The prompt of row ``row_index`` of the files (not of the shuffled order)."""
        return self._to_prompt(row_index)

    def _to_prompt(self, row_index: int) -> Prompt:
        row = self.rows[row_index]
        where = f"{self._origin[row_index]} row {row_index}"
        if self.prompt_key not in row or self.answer_key not in row:
            missing = self.prompt_key if self.prompt_key not in row else self.answer_key
            raise ValueError(f"{where}: no {missing!r} value (the row has {sorted(row)})")
        ground_truth = self._ground_truth(row[self.answer_key], where)
        extra = {k: v for k, v in row.items() if k not in (self.prompt_key, self.answer_key)}
        extra["row"] = row_index
        source = str(row.get("data_source") or self._origin[row_index].stem)
        text, messages = self._prompt(row[self.prompt_key], where)
        return Prompt(text=text, messages=messages, ground_truth=ground_truth, data_source=source,
                      extra=extra)

    def _ground_truth(self, answer: Any, where: str) -> dict[str, Any]:
        """The row's answer as a ground-truth dict; a missing (null) answer is refused: a rule
        reward would score it as the text "None"."""
        if isinstance(answer, dict):
            if "ground_truth" not in answer:
                raise ValueError(
                    f"{where}: column {self.answer_key!r} has no 'ground_truth' field "
                    f"(has {sorted(answer)})")
            truth = dict(answer)
        else:  # a bare answer column
            truth = {"ground_truth": answer}
        if truth["ground_truth"] is None:
            raise ValueError(f"{where}: the answer (column {self.answer_key!r}) is null")
        return truth

    def _prompt(self, raw: Any, where: str) -> tuple[str | None, list[dict[str, str]] | None]:
        """``(text, None)`` or ``(None, messages)``; empty prompts and messages whose role or
        content is not text are refused (they would train on "None" or on nothing)."""
        if isinstance(raw, str):
            if not raw.strip():
                raise ValueError(f"{where}: the prompt (column {self.prompt_key!r}) is empty")
            return raw, None
        if not isinstance(raw, list) or not all(
                isinstance(m, dict) and "role" in m and "content" in m for m in raw):
            raise ValueError(f"{where}: column {self.prompt_key!r} is neither text nor chat "
                             "messages ([{\"role\": ..., \"content\": ...}, ...])")
        for i, m in enumerate(raw):
            for part in ("role", "content"):
                if not isinstance(m[part], str):
                    raise TypeError(f"{where}: message {i} of column {self.prompt_key!r} has "
                                     f"a {part} of type {type(m[part]).__name__}, not text")
        if not any(m["content"].strip() for m in raw):
            raise ValueError(f"{where}: the prompt (column {self.prompt_key!r}) has no text in "
                             "any message")
        return None, [{"role": m["role"], "content": m["content"]} for m in raw]

    def __iter__(self) -> Iterator[Prompt]:
        while True:
            if self.position >= len(self):
                self.epoch += 1
                self.position = 0
                self._order = self._order_of(self.epoch)
            prompt = self._to_prompt(self._order[self.position])
            self.position += 1
            yield prompt

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._order_of(self.epoch)
