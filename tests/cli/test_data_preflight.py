"""Bad data is refused before anything starts: exit 2, the key path, a fix, nothing written.

``config validate`` checks the files (pyarrow, no torch); ``train`` also tokenises every
prompt (the tokenizer is needed) before Ray or any worker starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

RECIPE = """
[run]
name = "data"
output_dir = "{out}"
device = "cpu"
[model]
path = "tiny"
dtype = "float32"
[data]
train = "{train}"
max_prompt_tokens = 32
[algorithm]
prompts_per_step = 2
group_size = 2
[rollout]
max_new_tokens = 3
[[rewards]]
name = "digits_match"
[engines.train]
ranks = 1
micro_batch_size = 4
[data_plane]
backend = "memory"
[resources]
mode = "local"
[schedule]
total_steps = 1
[logging]
sinks = ["jsonl"]
progress = false
"""


def _chat(i: int) -> dict:
    return {"prompt": [{"role": "user", "content": f"{i}+{i}="}],
            "reward_model": {"ground_truth": str(2 * i)}}


def _write(path: Path, rows: list[dict], schema: pa.Schema | None = None) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _files(tmp: Path) -> dict[str, Path]:
    good = _write(tmp / "good.parquet", [_chat(i) for i in range(4)])
    text = good.read_bytes()
    (tmp / "csv.parquet").write_text("prompt,reward_model\n1+1=,2\n")
    (tmp / "cut.parquet").write_bytes(text[: len(text) // 2] + b"PAR1")
    (tmp / "dir.parquet").mkdir()
    plain = [{"prompt": f"{i}+{i}=", "reward_model": {"ground_truth": str(i)}} for i in range(3)]
    return {
        "good": good,
        "missing": tmp / "nope.parquet",
        "directory": tmp / "dir.parquet",
        "csv": tmp / "csv.parquet",
        "truncated": tmp / "cut.parquet",
        "no_prompt_column": _write(tmp / "nocol.parquet",
                                   [{"question": "1=", "reward_model": {"ground_truth": "1"}}]),
        "no_answer_column": _write(tmp / "noans.parquet", [{"prompt": "1="}]),
        "empty": _write(tmp / "empty.parquet", [], pa.schema(
            [("prompt", pa.string()), ("reward_model", pa.struct([("ground_truth",
                                                                    pa.string())]))])),
        "int_prompts": _write(tmp / "int.parquet",
                              [{"prompt": 5, "reward_model": {"ground_truth": "1"}}]),
        "int_content": _write(tmp / "intc.parquet", [
            {"prompt": [{"role": "user", "content": 5}], "reward_model": {"ground_truth": "1"}}]),
        "null_prompt": _write(tmp / "null.parquet", plain + [
            {"prompt": None, "reward_model": {"ground_truth": "1"}}]),
        "null_content": _write(tmp / "nullc.parquet", [_chat(1), {
            "prompt": [{"role": "user", "content": None}], "reward_model": {"ground_truth": "1"}}]),
        "no_ground_truth": _write(tmp / "nogt.parquet",
                                  [{"prompt": "1=", "reward_model": {"answer": "1"}}]),
        "empty_text": _write(tmp / "blank.parquet", plain + [
            {"prompt": "  ", "reward_model": {"ground_truth": "1"}}]),
        "empty_chat": _write(tmp / "blankc.parquet", [_chat(1), {
            "prompt": [{"role": "user", "content": ""}], "reward_model": {"ground_truth": "1"}}]),
        "null_answers": _write(tmp / "nullans.parquet", [_chat(0)] + [
            {**_chat(i), "reward_model": {"ground_truth": None}} for i in range(1, 4)]),
        "jsonl_int_content": _jsonl(tmp / "intc.jsonl", [
            {"prompt": [{"role": "user", "content": {"text": "1+1="}}], "reward_model": "2"}]),
        "jsonl_empty": _jsonl(tmp / "blank.jsonl", [{"prompt": "", "reward_model": "2"}]),
        "jsonl_null_answer": _jsonl(tmp / "nullans.jsonl", [
            {"prompt": "1+1=", "reward_model": "2"}, {"prompt": "2+2=", "reward_model": None}]),
        # 40 digits + <bos> = 41 tokens > max_prompt_tokens 32
        "too_long": _write(tmp / "long.parquet", plain + [
            {"prompt": "1" * 40, "reward_model": {"ground_truth": "1"}}]),
        # 28 tokens fit max_prompt_tokens, but 28 + 3 new > max_position_embeddings 30
        "past_positions": _write(tmp / "pos.parquet", plain + [
            {"prompt": "1" * 27, "reward_model": {"ground_truth": "1"}}]),
    }


# name -> (key path, words of the message); config validate catches the file problems
FILE_CASES = {
    "missing": ("data.train", "does not exist"),
    "directory": ("data.train", "is a directory but not one written by datasets"),
    "csv": ("data.train", "is not a parquet file (a CSV or text file)"),
    "truncated": ("data.train", "is not a readable parquet file"),
    "no_prompt_column": ("data.prompt_key", 'has no column "prompt"'),
    "no_answer_column": ("data.answer_key", 'has no column "reward_model"'),
    "empty": ("data.train", "has no rows"),
    "int_prompts": ("data.train", "holds int64, not prompts"),
    "int_content": ("data.train", "not prompts"),
    "null_prompt": ("data.train", "1 empty (null) prompt or message, the first in row 3"),
    "null_content": ("data.train", "1 empty (null) prompt or message, the first in row 1"),
    "no_ground_truth": ("data.train", 'without a "ground_truth" field'),
    "empty_text": ("data.train", ('has 1 of 4 rows with an empty prompt (column "prompt"), '
                   "the first in row 3")),
    "empty_chat": ("data.train", "has 1 of 2 rows with an empty prompt"),
    "null_answers": ("data.train", ('has 3 of 4 rows with a null answer (column "reward_model"), '
                     "the first in row 1")),
    "jsonl_int_content": ("data.train", ("row 0: message 0 of column 'prompt' has a content of "
                          "type dict, not text")),
    "jsonl_empty": ("data.train", "row 0: the prompt (column 'prompt') is empty"),
    "jsonl_null_answer": ("data.train", "row 1: the answer (column 'reward_model') is null"),
}
# only `train` tokenises
LENGTH_CASES = {
    "too_long": ("data.max_prompt_tokens",
                 "1 prompt of", "longest, row 3, has 41 tokens"),
    "past_positions": ("data.train", "row 3 of", ("has 28 prompt tokens; with "
                       "rollout.max_new_tokens = 3 that is more than the 30 positions")),
}


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    files = _files(tmp_path)
    out = tmp_path / "runs"

    def recipe(case: str, *extra: str) -> list[str]:
        path = tmp_path / f"{case}.toml"
        path.write_text(RECIPE.format(out=out, train=files[case]))
        return [str(path), "-s", "model.tiny.max_position_embeddings=30", *extra]

    return recipe, out


def _assert_refused(result, path: str, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert "Traceback" not in result.stderr
    assert f"\n  {path}: " in result.stderr, result.stderr
    for w in words:
        assert w in result.stderr, result.stderr
    assert "fix: " in result.stderr


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_config_validate_refuses_bad_data_files(rlctl, setup, case: str) -> None:  # type: ignore[no-untyped-def]
    recipe, out = setup
    result = rlctl("config", "validate", *recipe(case), code=2)
    _assert_refused(result, *FILE_CASES[case])
    assert not out.exists()


@pytest.mark.parametrize("case", sorted(FILE_CASES) + sorted(LENGTH_CASES))
def test_train_refuses_bad_data_before_anything_starts(rlctl, setup, case: str) -> None:  # type: ignore[no-untyped-def]
    recipe, out = setup
    result = rlctl("train", *recipe(case), code=2)
    _assert_refused(result, *(FILE_CASES.get(case) or LENGTH_CASES[case]))
    assert "Ray" not in result.stderr
    assert not out.exists()  # no run directory, no config.toml, no metrics


@pytest.mark.parametrize("case", sorted(LENGTH_CASES))
def test_config_validate_leaves_prompt_lengths_to_train(rlctl, setup, case: str) -> None:  # type: ignore[no-untyped-def]
    recipe, _ = setup
    assert rlctl("config", "validate", *recipe(case)).stdout.startswith("ok: ")


def test_the_fix_names_the_limit_to_raise(rlctl, setup) -> None:  # type: ignore[no-untyped-def]
    recipe, _ = setup
    err = rlctl("train", *recipe("too_long"), code=2).stderr
    assert "fix: set data.max_prompt_tokens = 41, or drop the long rows" in err
    err = rlctl("train", *recipe("past_positions"), code=2).stderr
    assert "fix: set rollout.max_new_tokens <= 2, drop the long rows, or raise " \
           "model.tiny.max_position_embeddings" in err


def test_a_good_file_passes_every_check(setup) -> None:  # type: ignore[no-untyped-def]
    from rlctl.config.pipeline import load_recipe
    from rlctl.run.preflight import preflight

    recipe, out = setup
    args = recipe("good")
    loaded = load_recipe([args[0]], [args[2]], {})
    assert preflight(loaded.recipe, resume=None).checkpoint is None
    assert not out.exists()


def test_a_missing_local_tokenizer_is_a_problem_of_model_path(rlctl, setup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    recipe, out = setup
    result = rlctl("train", *recipe("good", "-s", f"model.path={tmp_path / 'no-model'}"), code=2)
    _assert_refused(result, "model.path", "is not a local directory; rlctl never downloads")
    assert json.dumps(str(tmp_path / "no-model"))[1:-1] in result.stderr
    assert not out.exists()


def test_config_validate_checks_data_without_torch_or_ray(setup) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    from tests.cli.cli_helpers import ROOT
    from tests.cli.test_import_cost import HEAVY, PROBE

    recipe, _ = setup
    for case, code in (("good", "0"), ("int_prompts", "2")):
        args = ["config", "validate", *recipe(case)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLCTL_")}
        proc = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        probe = [line for line in proc.stderr.splitlines() if line.startswith("@@PROBE")]
        assert probe, proc.stderr
        _, got, heavy = (probe[-1].split(" ") + [""])[:3]
        assert (got, heavy) == (code, ""), proc.stderr
