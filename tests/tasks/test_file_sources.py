"""Prompt files besides parquet: JSONL and HF datasets directories, lists of files, errors."""

from __future__ import annotations

import json
from itertools import islice

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.tasks.file_source import FilePromptSource
from rlctl.tasks.prompt import PromptSource

ROWS = [
    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": f"{i}+{i}="}],
     "reward_model": {"ground_truth": str(2 * i), "style": "rule"}, "extra_info": {"index": i}}
    for i in range(5)
]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")  # a trailing blank line
    return path


def test_jsonl_reads_like_parquet(tmp_path):
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "a.parquet")
    from_parquet = FilePromptSource(tmp_path / "a.parquet", shuffle=False)
    from_jsonl = FilePromptSource(_jsonl(tmp_path / "a.jsonl", ROWS), shuffle=False)
    assert isinstance(from_jsonl, PromptSource) and len(from_jsonl) == 5
    assert list(islice(from_jsonl, 5)) == list(islice(from_parquet, 5))


def test_hf_datasets_directory_reads_like_parquet(tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is in the train extra")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))
    source = FilePromptSource(tmp_path / "ds", shuffle=False)
    first = next(iter(source))
    assert first.messages == [{"role": "user", "content": "0+0="}]
    assert first.ground_truth == {"ground_truth": "0", "style": "rule"}
    assert first.data_source == "openai/gsm8k" and first.extra["extra_info"] == {"index": 0}


def test_hf_dataset_dict_must_be_narrowed_to_a_split(tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is in the train extra")
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS),
                                   "test": datasets.Dataset.from_list(ROWS[:1])})
    splits.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ValueError, match=r"holds several splits \(train, test\).*dd/train"):
        FilePromptSource(tmp_path / "dd")
    assert len(FilePromptSource(tmp_path / "dd" / "test")) == 1


def test_a_list_of_files_is_concatenated_in_order(tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", ROWS[:2])
    b = _jsonl(tmp_path / "b.jsonl", [{"prompt": "plain", "reward_model": "7"}])
    source = FilePromptSource([a, b], shuffle=False)
    got = list(islice(source, 3))
    assert [p.ground_truth["ground_truth"] for p in got] == ["0", "2", "7"]
    assert got[2].text == "plain" and got[2].data_source == "b"  # the file names the source


def test_same_column_mapping_for_every_format(tmp_path):
    rows = [{"question": "1+1=", "answer": "2"}]
    source = FilePromptSource(_jsonl(tmp_path / "q.jsonl", rows), prompt_key="question",
                              answer_key="answer")
    assert next(iter(source)).ground_truth == {"ground_truth": "2"}
    with pytest.raises(ValueError, match=r"no column 'prompt' \(\[data\] prompt_key\); "
                                         r"columns are \['answer', 'question'\]"):
        FilePromptSource(tmp_path / "q.jsonl", answer_key="answer")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.jsonl", '{"prompt": "x", "reward_model": "1"}\n{not json\n', r"line 2 is not JSON"),
        ("list.jsonl", '["a", "b"]\n', r"line 1 is a JSON list, not an object"),
        ("empty.jsonl", "\n", r"has no rows"),
        ("data.csv", "prompt,reward_model\n", r"is not a parquet file \(.parquet\), a JSONL"),
    ],
)
def test_clear_errors(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        FilePromptSource(tmp_path / name, what="[data] train")


def test_missing_file_and_plain_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"\[data\] val: .*nope.jsonl' does not exist"):
        FilePromptSource(tmp_path / "nope.jsonl", what="[data] val")
    (tmp_path / "plain").mkdir()
    pytest.importorskip("datasets", reason="datasets is in the train extra")
    with pytest.raises(ValueError, match=r"not one written by datasets' save_to_disk"):
        FilePromptSource(tmp_path / "plain")


def test_config_validate_refuses_an_unreadable_format():
    from rlctl.config.pipeline import load_recipe
    from rlctl.config.problems import ConfigError

    with pytest.raises(ConfigError) as err:
        load_recipe(["recipes/tiny_grpo.toml"], ["data.task=", "data.train=['a.jsonl', 'b.csv']"],
                    env={})
    assert any(p.path == "data.train[1]" and "not a format rlctl reads" in p.message
               for p in err.value.problems)
