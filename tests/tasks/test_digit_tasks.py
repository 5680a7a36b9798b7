"""Synthetic digit tasks: answers, determinism, epochs, resume, options."""

from __future__ import annotations

from itertools import islice

import pytest
from pydantic import ValidationError

from rlctl.models.tiny import BOS_ID, build_tiny_tokenizer
from rlctl.registry import build_registry
from rlctl.tasks.prompt import PromptSource, tokenize_prompt
from rlctl.tasks.synthetic import CountDigitsOptions, DigitTask


@pytest.fixture(scope="module")
def registry():
    return build_registry(external="none")


def _make(registry, name: str, seed: int = 0, **options) -> DigitTask:
    reg = registry.get("task", name)
    return reg.load()(reg.options.model_validate(options), seed=seed)


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("count_digits", lambda d: str(len(d))),
        ("max_digit", max),
        ("sort_digits", lambda d: "".join(sorted(d))),
        ("reverse_digits", lambda d: d[::-1]),
    ],
)
def test_answers(registry, name, check):
    task = _make(registry, name)
    assert isinstance(task, PromptSource)
    assert registry.get("task", name).metadata["reward"] == "digits_match"
    for prompt in islice(task, 200):
        digits = prompt.text.removesuffix("=")
        assert digits.isdigit() and prompt.text.endswith("=")
        assert prompt.ground_truth == {"ground_truth": check(digits)}
        assert prompt.data_source == name


def test_count_digits_covers_every_length(registry):
    lengths = {len(p.text) - 1 for p in islice(_make(registry, "count_digits"), 500)}
    assert lengths == set(range(1, 10))


def test_deterministic_given_seed(registry):
    a = [p.text for p in islice(_make(registry, "max_digit", seed=1), 50)]
    b = [p.text for p in islice(_make(registry, "max_digit", seed=1), 50)]
    c = [p.text for p in islice(_make(registry, "max_digit", seed=2), 50)]
    assert a == b and a != c


def test_val_split_is_a_different_stream():
    train = DigitTask("count_digits", str, CountDigitsOptions(), seed=0)
    val = DigitTask("count_digits", str, CountDigitsOptions(), seed=0, split="val")
    assert [p.text for p in islice(train, 20)] != [p.text for p in islice(val, 20)]


def test_epochs_and_resume(registry):
    task = _make(registry, "sort_digits", epoch_size=7)
    stream = iter(task)
    first = [next(stream).text for _ in range(10)]
    assert task.state_dict() == {"epoch": 1, "position": 3}
    rest = [next(stream).text for _ in range(5)]
    resumed = _make(registry, "sort_digits", epoch_size=7)
    resumed.load_state_dict({"epoch": 1, "position": 3})
    assert [p.text for p in islice(resumed, 5)] == rest
    assert first[:7] != first[7:] + rest[:4]  # a new epoch draws new prompts


def test_bad_options_are_rejected():
    with pytest.raises(ValidationError, match="min_digits"):
        CountDigitsOptions(min_digits=5, max_digits=2)
    with pytest.raises(ValidationError):
        CountDigitsOptions(max_digits=12)  # answer would not be one digit
    with pytest.raises(ValidationError):
        CountDigitsOptions(digits=3)  # unknown option


def test_tokenised_prompt_starts_with_bos():
    tok = build_tiny_tokenizer()
    prompt = next(iter(DigitTask("count_digits", str, CountDigitsOptions(), seed=0)))
    ids = tokenize_prompt(prompt, tok, max_prompt_tokens=16)
    assert ids[0] == BOS_ID and len(ids) == len(prompt.text) + 1
    assert tok.decode(ids, skip_special_tokens=True) == prompt.text
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        tokenize_prompt(prompt, tok, max_prompt_tokens=1)
