"""Parquet prompt source (verl layout) and chat-template tokenisation."""

from __future__ import annotations

from itertools import islice

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlctl.models.tiny import build_tiny_tokenizer
from rlctl.tasks.parquet_source import ParquetPromptSource
from rlctl.tasks.prompt import PromptSource, tokenize_prompt

ROWS = [
    {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": f"{i}+{i}="}],
        "reward_model": {"ground_truth": str(2 * i), "style": "rule"},
        "extra_info": {"index": i},
    }
    for i in range(6)
]


@pytest.fixture
def parquet_file(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


def test_rows_become_prompts(parquet_file):
    source = ParquetPromptSource(parquet_file, shuffle=False)
    assert isinstance(source, PromptSource) and len(source) == 6
    first = next(iter(source))
    assert first.messages == [{"role": "user", "content": "0+0="}]
    assert first.ground_truth == {"ground_truth": "0", "style": "rule"}
    assert first.data_source == "openai/gsm8k"
    assert first.extra["extra_info"] == {"index": 0}


def test_shuffled_epochs_are_permutations_and_resume(parquet_file):
    source = ParquetPromptSource(parquet_file, seed=1)
    stream = iter(source)
    epoch0 = [next(stream).ground_truth["ground_truth"] for _ in range(6)]
    epoch1 = [next(stream).ground_truth["ground_truth"] for _ in range(6)]
    assert (
        sorted(epoch0) == sorted(epoch1) == sorted(r["reward_model"]["ground_truth"] for r in ROWS)
    )
    assert epoch0 != epoch1
    resumed = ParquetPromptSource(parquet_file, seed=1)
    resumed.load_state_dict({"epoch": 1, "position": 2})
    assert [p.ground_truth["ground_truth"] for p in islice(resumed, 4)] == epoch1[2:]


def test_missing_column_names_it(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"question": "x", "reward_model": {"ground_truth": "1"}}]), path
    )
    with pytest.raises(ValueError, match="no column 'prompt'.*prompt_key"):
        ParquetPromptSource(path)


def test_chat_template_is_applied_when_present(parquet_file):
    tok = build_tiny_tokenizer()
    prompt = next(iter(ParquetPromptSource(parquet_file, shuffle=False)))
    plain = tokenize_prompt(prompt, tok)
    assert tok.decode(plain, skip_special_tokens=True) == "0+0="
    tok.chat_template = (
        "{% for m in messages %}x:{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}a:{% endif %}"
    )
    templated = tokenize_prompt(prompt, tok)
    assert tok.decode(templated, skip_special_tokens=True) == "x:0+0=a:"
    assert tokenize_prompt(prompt, tok, apply_chat_template=False) == plain


@pytest.mark.parametrize("template", [False, True], ids=["no-template", "template"])
def test_a_batch_tokenises_exactly_as_one_prompt_at_a_time(template):
    """The feeder tokenises a step's prompts in one call; the ids must not change."""
    from rlctl.tasks.prompt import Prompt, tokenize_prompts

    tok = build_tiny_tokenizer()
    if template:
        tok.chat_template = "{% for m in messages %}x:{{ m['content'] }}{% endfor %}a:"
    prompts = [Prompt({}, "t", text="12="), Prompt({}, "t", messages=[
        {"role": "user", "content": "3+4="}, {"role": "user", "content": "5"}]),
        Prompt({}, "t", text=""), Prompt({}, "t", text="987654=")]
    one_by_one = [tokenize_prompt(p, tok) for p in prompts]
    assert tokenize_prompts(prompts, tok) == one_by_one
    assert len(set(map(tuple, one_by_one))) == 4
    with pytest.raises(ValueError, match=r"has \d+ tokens, more than .data. max_prompt_tokens = 7"):
        tokenize_prompts(prompts, tok, max_prompt_tokens=7)
