"""The ``reasoning_gym`` task (held-out split by seed, never overlapping training) and the
``reasoning_gym`` reward (answer extraction, the generator's own verifier)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

pytest.importorskip("reasoning_gym", reason='pip install "rlctl[real]"')

from rlctl.rewards.base import RewardInput
from rlctl.rewards.reasoning_gym_reward import extract_answer, reasoning_gym
from rlctl.tasks.reasoning_gym_task import ReasoningGymOptions, reasoning_gym_task

SUMS = {"min_terms": 2, "max_terms": 2, "min_digits": 2, "max_digits": 2, "operators": ["+"],
        "allow_parentheses": False, "allow_negation": False}
TEMPLATE = "What is {expression}? Answer with the number only."


def _options(**kw) -> ReasoningGymOptions:  # type: ignore[no-untyped-def]
    base = {"dataset": "basic_arithmetic", "config": SUMS, "template": TEMPLATE, "held_out": 16}
    return ReasoningGymOptions(**{**base, **kw})


def _take(task, count: int) -> list:  # type: ignore[no-untyped-def]
    stream = iter(task)
    return [next(stream) for _ in range(count)]


def test_training_never_sees_a_held_out_question_even_where_questions_repeat() -> None:
    # 1-digit sums: ~120 distinct questions, so the training stream hits held-out ones often
    small = dict(SUMS, min_digits=1, max_digits=1)
    options = _options(config=small, held_out=30)
    val = reasoning_gym_task(options, seed=3, split="val")
    held_out = {p.messages[0]["content"] for p in _take(val, 30)}
    assert len(held_out) == 30  # distinct questions
    train = [p.messages[0]["content"] for p in _take(reasoning_gym_task(options, seed=3), 600)]
    assert not held_out & set(train)
    assert len(set(train)) >= 60  # the rest of the space is still trained on


def test_the_held_out_split_is_the_same_prompts_in_order_on_every_pass() -> None:
    task = reasoning_gym_task(_options(), seed=0, split="val")
    first, second = _take(task, 16), _take(task, 16)
    assert [p.messages for p in first] == [p.messages for p in second]
    again = reasoning_gym_task(_options(), seed=0, split="val")
    assert [p.ground_truth for p in _take(again, 16)] == [p.ground_truth for p in first]
    other_seed = reasoning_gym_task(_options(), seed=1, split="val")
    assert [p.messages for p in _take(other_seed, 16)] != [p.messages for p in first]


def test_prompts_are_chat_messages_with_the_template_and_the_verifiers_ground_truth() -> None:
    prompt = _take(reasoning_gym_task(_options(system_prompt="Be brief."), seed=0), 1)[0]
    system, user = prompt.messages
    assert system == {"role": "system", "content": "Be brief."}
    a, b = user["content"].removeprefix("What is ").split("?")[0].split(" + ")
    assert user["content"].endswith("? Answer with the number only.")
    assert prompt.ground_truth["ground_truth"] == str(int(a) + int(b))
    assert prompt.ground_truth["reasoning_gym"]["dataset"] == "basic_arithmetic"
    assert prompt.data_source == "reasoning_gym/basic_arithmetic"


def test_the_training_stream_resumes_exactly_from_its_state() -> None:
    task = reasoning_gym_task(_options(epoch_size=5), seed=0)
    _take(task, 7)  # into the second epoch
    state = task.state_dict()
    expected = [p.messages for p in _take(task, 4)]
    resumed = reasoning_gym_task(_options(epoch_size=5), seed=0)
    resumed.load_state_dict(state)
    assert [p.messages for p in _take(resumed, 4)] == expected


def test_the_chat_template_formats_the_prompt() -> None:
    from rlctl.tasks import tokenize_prompt
    from rlctl.testing.chat_model import build_chat_tokenizer

    tok = build_chat_tokenizer()
    prompt = _take(reasoning_gym_task(_options(), seed=0), 1)[0]
    text = tok.decode(tokenize_prompt(prompt, tok))
    assert text == f"<|im_start|>user\n{prompt.messages[0]['content']}<|im_end|>\n" \
                   "<|im_start|>assistant\n"


@pytest.mark.parametrize(("change", "message"), [
    ({"dataset": "basic_arithmetik"}, "did you mean 'basic_arithmetic'"),
    ({"config": {"seed": 3}}, "seed in config: the splits set them"),
    ({"template": "{question} ({answer})"}, "would give the answer away"),
    ({"config": {"no_such_option": 1}}, r"config.no_such_option\n.*no option 'no_such_"),
    # the generator's dataclass takes anything: a table where a flag belongs is refused here
    ({"config": {"allow_parentheses": {"x": 1}}}, r"config.allow_parentheses\n.*boolean"),
    ({"config": {"operators": 7}}, r"config.operators\n.*valid list"),
])
def test_bad_options_are_config_errors(change, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match=message):
        _options(**change)


def test_an_unknown_generator_option_is_named_at_its_key_with_a_guess() -> None:
    with pytest.raises(ValidationError) as caught:
        _options(config={"min_termz": 2})
    (error,) = caught.value.errors()
    assert error["loc"] == ("config", "min_termz")
    assert error["ctx"]["fix"] == "did you mean 'min_terms'?"


def _sample(text: str, answer: str, dataset: str = "basic_arithmetic",
            entry: dict | None = None) -> RewardInput:
    entry = entry or {"question": "q", "answer": answer, "metadata": {}}
    return RewardInput(prompt_text="", response_text=text, response_ids=(),
                       ground_truth={"ground_truth": answer,
                                     "reasoning_gym": {"dataset": dataset, "entry": entry}},
                       data_source=f"reasoning_gym/{dataset}")


@pytest.mark.parametrize(("text", "expected", "found"), [
    ("17 + 25 = 42.", "42", "42"),                 # the last number, trailing period dropped
    ("The answer is 1,200", "1200", "1200"),        # thousands separators
    ("It is \u22125.", "-5", "-5"),                 # a Unicode minus
    ("<answer> 42.0 </answer> then 7", "42", "42"),  # an answer block wins over later numbers
    ("To solve this, we add the numbers", "42", None),
    ("  olleh. ", "olleh", "olleh"),                # a non-number answer: the stripped text
])
def test_answer_extraction_is_robust_to_the_models_formatting(text, expected, found) -> None:  # type: ignore[no-untyped-def]
    assert extract_answer(text, expected) == found


def test_the_reward_is_the_generators_own_verdict_on_the_extracted_answer() -> None:
    assert reasoning_gym(_sample("47 + 38 = 85.", "85")) == {"score": 1.0, "extracted": 1.0}
    assert reasoning_gym(_sample("47 + 38 = 84.", "85")) == {"score": 0.0, "extracted": 1.0}
    assert reasoning_gym(_sample("Let me think", "85")) == {"score": 0.0, "extracted": 0.0}
    # tag mode: only an answer block counts
    assert reasoning_gym(_sample("85", "85"), extract="tag")["extracted"] == 0.0
    # a generator with its own scoring (spell_backward checks the reversed word)
    from rlctl.tasks.reasoning_gym_task import ReasoningGymOptions as Opts
    task = reasoning_gym_task(Opts(dataset="spell_backward", held_out=2), seed=0, split="val")
    prompt = _take(task, 1)[0]
    gt = prompt.ground_truth
    good = RewardInput(prompt_text="", response_text=f"{gt['ground_truth']}", response_ids=(),
                       ground_truth=gt, data_source=prompt.data_source)
    assert reasoning_gym(good)["score"] == 1.0


def test_a_sample_without_the_tasks_ground_truth_is_a_clear_error() -> None:
    sample = RewardInput(prompt_text="", response_text="1", response_ids=(),
                         ground_truth={"ground_truth": "1"}, data_source="count_digits")
    with pytest.raises(ValueError, match="scores prompts of the reasoning_gym task"):
        reasoning_gym(sample)


def test_validation_must_score_the_whole_held_out_split() -> None:
    from pathlib import Path

    from rlctl.config.pipeline import load_recipe
    from rlctl.config.problems import ConfigError

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "smollm2_grpo.toml"
    assert load_recipe([recipe], []).recipe.data.val_size == 64
    with pytest.raises(ConfigError) as err:
        load_recipe([recipe], ["data.val_size=32"])
    assert [p.path for p in err.value.problems] == ["data.val_size"]
