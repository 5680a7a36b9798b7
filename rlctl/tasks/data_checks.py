"""Checks of ``[data]`` files before a run starts: as config problems, with the key to fix.

Two levels, so each command pays only for what it needs:

* :func:`data_file_problems` reads parquet footers and the prompt column with pyarrow (no
  torch): the file exists, is parquet, has rows, has the prompt and answer columns, and the
  prompts are text or chat messages (``rlctl config validate`` and ``rlctl train``);
* :func:`prompt_length_problems` tokenises every prompt as the trainer will and compares
  the longest with ``data.max_prompt_tokens`` and with the model's positions (``rlctl
  train``, before any worker starts: it needs the tokenizer).

Without them each of these surfaced only once Ray and the workers were up, as a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlctl.config.problems import ConfigProblem, did_you_mean
from rlctl.config.recipe import DataSection, Recipe

_TEXT = ("string", "large_string", "string_view")
_PARQUET_MAGIC = b"PAR1"
_LAYOUT = ('a string, or chat messages: a list of {role, content} structs with string '
           'fields (verl layout)')


def _splits(data: DataSection) -> list[tuple[str, Path]]:
    """``(key path, file)`` of every prompt file; a list value gives ``data.train[i]`` keys."""
    out: list[tuple[str, Path]] = []
    for split in ("train", "val"):
        value = getattr(data, split)
        if isinstance(value, list):
            out += [(f"{split}[{i}]", Path(p)) for i, p in enumerate(value)]
        elif value is not None:
            out.append((split, Path(value)))
    return out


# --------------------------------------------------------------------------- files


def data_file_problems(data: DataSection) -> list[ConfigProblem]:
    """Problems of ``data.train`` / ``data.val``; an empty list when both are fine (or unset)."""
    out: list[ConfigProblem] = []
    for split, path in _splits(data):
        out += _file_problems(data, split, path)
    return out


def _file_problems(data: DataSection, split: str, path: Path) -> list[ConfigProblem]:
    key = f"data.{split}"
    shown = json.dumps(str(path))
    if not path.exists():
        return [ConfigProblem(key, f"{shown} does not exist",
                              f"check the path (working directory: {Path.cwd()})")]
    if path.is_dir() or path.suffix == ".jsonl":
        return _rows_problems(data, key, path)
    if not path.is_file():
        return [ConfigProblem(key, f"{shown} is not a file", "give the path of a .parquet file")]
    try:
        with path.open("rb") as f:
            head = f.read(4)
            f.seek(max(path.stat().st_size - 4, 0))
            tail = f.read(4)
    except OSError as exc:
        return [ConfigProblem(key, f"{shown} cannot be read: {exc.strerror}",
                              "check the file's permissions")]
    if head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
        kind = "a CSV or text file" if _looks_like_text(path) else "not parquet"
        return [ConfigProblem(
            key, f"{shown} is not a parquet file ({kind})",
            "convert it, e.g. pandas.read_csv(path).to_parquet(\"train.parquet\"), or "
            "pyarrow.parquet.write_table(table, path)")]
    try:
        import pyarrow.parquet as pq
    except ImportError:  # the CLI without the training extras: existence is all we can check
        return []
    try:
        meta = pq.ParquetFile(path)
        schema = meta.schema_arrow
        rows = meta.metadata.num_rows
    except Exception as exc:  # noqa: BLE001 -- pyarrow raises several types for a broken file
        return [ConfigProblem(key, f"{shown} is not a readable parquet file: {exc}",
                              "write the file again (it may be truncated)")]
    out: list[ConfigProblem] = []
    columns = list(schema.names)
    for col_key, column in (("prompt_key", data.prompt_key), ("answer_key", data.answer_key)):
        if column not in columns:
            guess = did_you_mean(column, columns)
            out.append(ConfigProblem(
                f"data.{col_key}", f"{shown} ({key}) has no column {json.dumps(column)}; its "
                f"columns are {', '.join(columns) or 'none'}",
                f'set data.{col_key} = "{guess}"' if guess else
                f"set data.{col_key} to one of its columns"))
    if out:
        return out
    if rows == 0:
        return [ConfigProblem(key, f"{shown} has no rows", "give a file with prompts in it")]
    out += _prompt_type_problems(key, shown, data.prompt_key, schema.field(data.prompt_key).type)
    out += _answer_type_problems(key, shown, data.answer_key, schema.field(data.answer_key).type)
    return out or _value_problems(data, key, shown, path)


def _value_problems(data: DataSection, key: str, shown: str, path: Path) -> list[ConfigProblem]:
    """The first of: null prompts, empty prompts, null answers (each read column by column)."""
    for check, column in ((_null_problems, data.prompt_key), (_empty_problems, data.prompt_key),
                          (_answer_null_problems, data.answer_key)):
        found = check(key, shown, path, column)
        if found:
            return found
    return []


def _rows_problems(data: DataSection, key: str, path: Path) -> list[ConfigProblem]:
    """A JSONL file or an HF ``datasets`` directory: read it as training will, every row
    turned into a prompt (no footer to read without loading, unlike parquet)."""
    from rlctl.tasks.file_source import FilePromptSource

    try:
        source = FilePromptSource(path, prompt_key=data.prompt_key, answer_key=data.answer_key,
                                  shuffle=False, what=f"[data] {key.removeprefix('data.')}")
        for row in range(len(source)):
            prompt = source.prompt_at(row)
            if prompt.text is None and not prompt.messages:
                raise ValueError(f"{path} row {row}: the prompt is empty")
    except ImportError as exc:
        return [ConfigProblem(key, f"{json.dumps(str(path))} needs {exc.name or exc}",
                              "pip install datasets (or give a .parquet / .jsonl file)")]
    except (OSError, ValueError, TypeError, KeyError) as exc:
        fix = ("give a .parquet or .jsonl file, or a directory saved by Dataset.save_to_disk"
               if path.is_dir() else f"fix the file; prompts are {_LAYOUT}")
        return [ConfigProblem(key, str(exc), fix)]
    return []


def _looks_like_text(path: Path) -> bool:
    with path.open("rb") as f:
        sample = f.read(512)
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in sample


def _prompt_type_problems(key: str, shown: str, column: str, tp: Any) -> list[ConfigProblem]:
    import pyarrow as pa

    if str(tp) in _TEXT:
        return []
    item = tp.value_type if pa.types.is_list(tp) or pa.types.is_large_list(tp) else None
    if item is not None and pa.types.is_struct(item):
        fields = {item.field(i).name: str(item.field(i).type) for i in range(item.num_fields)}
        if fields.get("role") in _TEXT and fields.get("content") in _TEXT:
            return []
    return [ConfigProblem(key, f"column {json.dumps(column)} of {shown} holds {tp}, not prompts",
                          f"store each prompt as {_LAYOUT}")]


def _answer_type_problems(key: str, shown: str, column: str, tp: Any) -> list[ConfigProblem]:
    import pyarrow as pa

    if pa.types.is_struct(tp):
        names = [tp.field(i).name for i in range(tp.num_fields)]
        if "ground_truth" not in names:
            return [ConfigProblem(
                key, f"column {json.dumps(column)} of {shown} is a struct without a "
                f"\"ground_truth\" field (fields: {', '.join(names)})",
                "put the answer under ground_truth (verl layout), or point data.answer_key at "
                "a plain answer column")]
    return []


def _null_problems(key: str, shown: str, path: Path, column: str) -> list[ConfigProblem]:
    """Rows whose prompt is null, or whose messages have a null role or content."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    values = pq.read_table(path, columns=[column]).column(column).combine_chunks()
    bad = pc.is_null(values)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        # a message with a null role or content, or a null message, spoils its row
        messages = pc.list_flatten(values)
        broken = pc.or_(pc.is_null(messages), pc.or_(
            pc.is_null(pc.struct_field(messages, "role")),
            pc.is_null(pc.struct_field(messages, "content"))))
        rows = pc.list_parent_indices(values)
        spoilt = pc.filter(rows, broken).to_pylist()
        if spoilt:
            mask = [False] * len(values)
            for row in spoilt:
                mask[row] = True
            bad = pc.or_(pc.fill_null(bad, True), pa.array(mask))
    count = pc.sum(bad).as_py() or 0
    if not count:
        return []
    first = pc.index(bad, True).as_py()
    return [ConfigProblem(
        key, f"column {json.dumps(column)} of {shown} has {count} empty (null) prompt"
        f"{'s' if count != 1 else ''} or message{'s' if count != 1 else ''}, the first in row "
        f"{first}", "drop or fill those rows")]


def _rows_problem(key: str, shown: str, bad: Any, what: str, fix: str) -> list[ConfigProblem]:
    """One problem for the rows where boolean array ``bad`` is true (none: no problem)."""
    import pyarrow.compute as pc

    count = pc.sum(bad).as_py() or 0
    if not count:
        return []
    first = pc.index(bad, True).as_py()
    return [ConfigProblem(key, f"{shown} has {count} of {len(bad)} rows with {what}, the first "
                          f"in row {first}", fix)]


def _empty_problems(key: str, shown: str, path: Path, column: str) -> list[ConfigProblem]:
    """Prompts with no text: an empty string, or messages whose contents are all empty."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    values = pq.read_table(path, columns=[column]).column(column).combine_chunks()
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        messages = pc.list_flatten(values)
        texty = pc.not_equal(pc.utf8_trim_whitespace(pc.struct_field(messages, "content")), "")
        with_text = set(pc.filter(pc.list_parent_indices(values), texty).to_pylist())
        bad = pa.array([row not in with_text for row in range(len(values))])
    else:
        bad = pc.equal(pc.utf8_trim_whitespace(values), "")
    return _rows_problem(key, shown, bad, f"an empty prompt (column {json.dumps(column)})",
                         "drop those rows or give them text")


def _answer_null_problems(key: str, shown: str, path: Path, column: str) -> list[ConfigProblem]:
    """Rows whose answer is null (a struct's ``ground_truth`` field, or the plain column): a
    rule reward would score them against the text "None"."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    values = pq.read_table(path, columns=[column]).column(column).combine_chunks()
    bad = pc.is_null(values)
    if pa.types.is_struct(values.type):
        bad = pc.or_(pc.fill_null(bad, True), pc.is_null(pc.struct_field(values, "ground_truth")))
    return _rows_problem(key, shown, pc.fill_null(bad, True),
                         f"a null answer (column {json.dumps(column)})",
                         "drop those rows or fill in their answers")


# --------------------------------------------------------------------------- lengths


@dataclass(frozen=True)
class _Longest:
    split: str
    row: int
    tokens: int
    over_limit: int


def prompt_length_problems(recipe: Recipe, tokenizer: Any) -> list[ConfigProblem]:
    """Every file prompt, tokenised as the trainer will, against the two limits.

    Call only when :func:`data_file_problems` found nothing. Synthetic tasks are not
    checked here: their prompts are generated, and short by construction.
    """
    from rlctl.tasks.file_source import FilePromptSource
    from rlctl.tasks.prompt import tokenize_prompt

    data = recipe.data
    positions, where = model_positions(recipe)
    new_tokens = recipe.rollout.max_new_tokens
    out: list[ConfigProblem] = []
    for split, path in _splits(data):
        source = FilePromptSource(path, prompt_key=data.prompt_key,
                                  answer_key=data.answer_key, shuffle=False)
        longest = _Longest(split, -1, 0, 0)
        for row in range(len(source)):
            ids = tokenize_prompt(source.prompt_at(row), tokenizer,
                                  apply_chat_template=data.apply_chat_template)
            over = longest.over_limit + (len(ids) > data.max_prompt_tokens)
            if len(ids) > longest.tokens:
                longest = _Longest(split, row, len(ids), over)
            else:
                longest = _Longest(split, longest.row, longest.tokens, over)
        shown = json.dumps(str(path))
        if longest.over_limit:
            out.append(ConfigProblem(
                "data.max_prompt_tokens",
                f"{longest.over_limit} prompt{'s' if longest.over_limit != 1 else ''} of "
                f"{shown} (data.{split}) are longer than data.max_prompt_tokens = "
                f"{data.max_prompt_tokens}; the longest, row {longest.row}, has "
                f"{longest.tokens} tokens",
                f"set data.max_prompt_tokens = {longest.tokens}, or drop the long rows "
                "(prompts are never truncated)"))
        if positions is not None and longest.tokens + new_tokens > positions:
            room = positions - longest.tokens
            out.append(ConfigProblem(
                f"data.{split}",
                f"row {longest.row} of {shown} has {longest.tokens} prompt tokens; with "
                f"rollout.max_new_tokens = {new_tokens} that is more than the {positions} "
                f"positions of the model ({where})",
                (f"set rollout.max_new_tokens <= {room}, " if room > 0 else "")
                + "drop the long rows, or "
                + (f"raise {where}" if where.startswith("model.") else
                   "use a model with more positions")))
    return out


def model_positions(recipe: Recipe) -> tuple[int | None, str]:
    """The longest sequence the policy takes, and where that number comes from."""
    model = recipe.model
    if model.path in ("tiny", "tiny-chat"):  # the built-in models: [model.tiny]
        return model.tiny.max_position_embeddings, "model.tiny.max_position_embeddings"
    from rlctl.models.catalog import resolve_model_path
    from rlctl.regular_file import read_text

    try:
        config = Path(resolve_model_path(model.path)) / "config.json"
    except FileNotFoundError:
        return None, ""  # a model not installed is reported by the preflight
    try:
        cfg = json.loads(read_text(config))  # not a FIFO: that would hang here
    except (OSError, ValueError):
        return None, ""  # a missing model is reported where it is loaded
    if not isinstance(cfg, dict):
        return None, ""
    for section in (cfg, cfg.get("text_config") or {}):
        value = section.get("max_position_embeddings") if isinstance(section, dict) else None
        if isinstance(value, int) and value > 0:
            return value, f"max_position_embeddings in {config}"
    return None, ""
