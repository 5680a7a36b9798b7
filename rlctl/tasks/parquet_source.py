"""Prompts from a parquet file in verl's layout (kept for callers that name the format).

:class:`rlctl.tasks.file_source.FilePromptSource` reads parquet, JSONL and HF ``datasets``
directories with the same column mapping; this is that source over one parquet file.
"""

from __future__ import annotations

from pathlib import Path

from rlctl.tasks.file_source import FilePromptSource


class ParquetPromptSource(FilePromptSource):
    """A :class:`~rlctl.tasks.prompt.PromptSource` over the rows of one parquet file."""

    def __init__(self, path: str | Path, *, prompt_key: str = "prompt",
                 answer_key: str = "reward_model", seed: int = 0, shuffle: bool = True) -> None:
        if Path(path).suffix != ".parquet":
            raise ValueError(f"[data] {str(path)!r} is not a .parquet file")
        super().__init__(path, prompt_key=prompt_key, answer_key=answer_key, seed=seed,
                         shuffle=shuffle)
