"""Prompts from a parquet file in verl's layout.

Columns: ``prompt`` (chat messages ``list[{"role", "content"}]`` or a plain string; the
name is ``[data] prompt_key``), ``reward_model`` (a struct whose ``ground_truth`` field is
the answer; ``[data] answer_key``), ``data_source`` (optional string). Other columns ride
along in :attr:`Prompt.extra`. Each epoch is a fresh permutation seeded by ``(seed, epoch)``
when ``shuffle`` is on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlctl.tasks.prompt import Prompt


class ParquetPromptSource:
    """A :class:`~rlctl.tasks.prompt.PromptSource` over the rows of one parquet file."""

    def __init__(
        self,
        path: str | Path,
        *,
        prompt_key: str = "prompt",
        answer_key: str = "reward_model",
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        import pyarrow.parquet as pq

        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"[data] parquet file {str(self.path)!r} does not exist")
        table = pq.read_table(self.path)
        for key, what in ((prompt_key, "prompt_key"), (answer_key, "answer_key")):
            if key not in table.column_names:
                raise ValueError(
                    f"{self.path}: no column {key!r} ([data] {what}); columns are "
                    f"{table.column_names}; set [data] {what} to the right one"
                )
        self.rows: list[dict[str, Any]] = table.to_pylist()
        if not self.rows:
            raise ValueError(f"{self.path} has no rows")
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
        """The prompt of row ``row_index`` of the file (not of the shuffled order)."""
        return self._to_prompt(row_index)

    def _to_prompt(self, row_index: int) -> Prompt:
        row = self.rows[row_index]
        raw = row[self.prompt_key]
        answer = row[self.answer_key]
        if isinstance(answer, dict):
            if "ground_truth" not in answer:
                raise ValueError(
                    f"{self.path} row {row_index}: column {self.answer_key!r} has no "
                    f"'ground_truth' field (has {sorted(answer)})"
                )
            ground_truth = dict(answer)
        else:  # a bare answer column
            ground_truth = {"ground_truth": answer}
        extra = {k: v for k, v in row.items() if k not in (self.prompt_key, self.answer_key)}
        extra["row"] = row_index
        source = str(row.get("data_source") or self.path.stem)
        if isinstance(raw, str):
            return Prompt(text=raw, ground_truth=ground_truth, data_source=source, extra=extra)
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in raw]
        return Prompt(messages=messages, ground_truth=ground_truth, data_source=source, extra=extra)

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
