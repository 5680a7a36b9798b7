"""Reward functions and their combination."""

from __future__ import annotations

import inspect
import json

import pytest

from rlctl.config.recipe import RewardSection
from rlctl.hookspecs import hookimpl
from rlctl.models.tiny import EOS_ID, build_tiny_tokenizer
from rlctl.plugin_errors import PluginCallError
from rlctl.registry import build_registry
from rlctl.rewards.base import RewardInput
from rlctl.rewards.gsm8k import extract_answer, gsm8k
from rlctl.rewards.match import digits_match, exact_match
from rlctl.rewards.reward_set import RewardSet
from rlctl.rewards.shaping import length_penalty


def _sample(text: str, answer: str, *, ids=(), finish="stop") -> RewardInput:
    return RewardInput(prompt_text="", response_text=text, response_ids=tuple(ids),
                       ground_truth={"ground_truth": answer}, data_source="t",
                       finish_reason=finish)


@pytest.mark.parametrize(
    ("completion", "target", "score"),
    [("5", "5", 1.0), ("", "5", 0.0), ("55", "5", 0.5), ("555", "5", 1 / 3), ("6", "5", 0.0),
     ("248", "248", 1.0), ("24", "248", 2 / 3), ("2489", "248", 3 / 4), ("842", "248", 1 / 3)],
)
def test_digits_match_partial_credit(completion, target, score):
    result = digits_match(_sample(completion, target))
    assert result["score"] == pytest.approx(score)
    assert result["exact"] == float(completion == target)


def test_from_tokens_cuts_at_first_eos():
    tok = build_tiny_tokenizer()
    ids = tok("7")["input_ids"][1:] + [EOS_ID] + tok("99")["input_ids"][1:]
    sample = RewardInput.from_tokens(tok, prompt_ids=tok("1234567=")["input_ids"],
                                     response_ids=ids, ground_truth={"ground_truth": "7"},
                                     data_source="count_digits", eos_token_ids=[EOS_ID])
    assert sample.response_text == "7" and sample.finish_reason == "stop"
    assert sample.prompt_text == "1234567="
    assert digits_match(sample)["score"] == 1.0
    no_eos = RewardInput.from_tokens(tok, prompt_ids=[1], response_ids=tok("777")["input_ids"][1:],
                                     ground_truth={"ground_truth": "7"}, data_source="c",
                                     eos_token_ids=[EOS_ID])
    assert no_eos.finish_reason == "length" and digits_match(no_eos)["score"] == pytest.approx(
        1 / 3
    )


def test_exact_match_options():
    assert exact_match(_sample(" Ab ", "Ab")) == 1.0
    assert exact_match(_sample(" Ab ", "Ab"), strip=False) == 0.0
    assert exact_match(_sample("ab", "AB"), case_sensitive=False) == 1.0


def test_gsm8k():
    assert extract_answer("so 3 + 4 = 7 #### 7") == "7"
    assert extract_answer("the answer is $1,200.") is None
    assert extract_answer("the answer is $1,200.", "flexible") == "1200"
    assert gsm8k(_sample("#### 1,200", "1200"))["score"] == 1.0
    assert gsm8k(_sample("#### 12", "#### 1200"), format_score=0.1)["score"] == 0.1
    assert gsm8k(_sample("no number", "3"))["score"] == 0.0
    assert gsm8k(_sample("it is 3.0 then 42", "42"), method="flexible")["score"] == 1.0


def test_length_penalty():
    assert length_penalty(_sample("", "", ids=range(4)), target_tokens=4, max_tokens=8) == 0.0
    assert length_penalty(_sample("", "", ids=range(6)), target_tokens=4, max_tokens=8) == -0.5
    assert length_penalty(_sample("", "", ids=range(8), finish="length"), target_tokens=4,
                          max_tokens=8, truncated_penalty=0.5) == -1.5


def test_reward_set_weights_and_logs_each_term():
    registry = build_registry(external="none")
    # options come validated from the loaded recipe, in section order
    penalty = registry.get("reward_function", "length_penalty").options
    rewards = RewardSet.from_sections(
        [RewardSection(name="digits_match"), RewardSection(name="length_penalty", weight=0.5)],
        registry,
        [None, penalty(target_tokens=1, max_tokens=3)],
    )
    out = rewards(_sample("55", "5", ids=(9, 9, EOS_ID)))
    assert out["digits_match"] == 0.5 and out["digits_match/exact"] == 0.0
    assert out["length_penalty"] == -1.0
    assert out["score"] == pytest.approx(0.5 - 0.5)
    with pytest.raises(ValueError, match="1 reward sections but 0 option sets"):
        RewardSet.from_sections([RewardSection(name="gsm8k")], registry, [])


def test_a_pad_token_before_eos_is_not_a_correct_answer():
    """A model must end with eos: stopping with <pad> (skipped by decode) is not an answer."""
    tok = build_tiny_tokenizer()
    answer = tok("3")["input_ids"][1:]
    for tail in ([tok.pad_token_id, tok.pad_token_id], [tok.pad_token_id, tok.eos_token_id]):
        sample = RewardInput.from_tokens(
            tok,
            prompt_ids=tok("123=")["input_ids"],
            response_ids=answer + tail,
            ground_truth={"ground_truth": "3"},
            data_source="count_digits",
            eos_token_ids=[tok.eos_token_id],
        )
        assert digits_match(sample)["exact"] == 0.0
        assert digits_match(sample)["score"] < 0.5
    good = RewardInput.from_tokens(
        tok,
        prompt_ids=tok("123=")["input_ids"],
        response_ids=answer + [tok.eos_token_id],
        ground_truth={"ground_truth": "3"},
        data_source="count_digits",
        eos_token_ids=[tok.eos_token_id],
    )
    assert digits_match(good) == {"score": 1.0, "exact": 1.0}


class _MisbehavingRewards:
    """An in-process plugin: one reward raises inside a library call, one returns no score."""

    @staticmethod
    def parse_int(sample, **options):
        return int(sample.response_text)  # int("5x") raises in the interpreter, here

    @staticmethod
    def parse_json(sample, **options):
        return json.loads(sample.response_text)  # raises inside the json package

    @staticmethod
    def no_score(sample, **options):
        return {"parsed": 1.0}

    @hookimpl
    def register_reward_functions(self, register) -> None:  # type: ignore[no-untyped-def]
        register("parse_int", self.parse_int)
        register("parse_json", self.parse_json)
        register("no_score", self.no_score)


def test_a_reward_that_raises_names_plugin_kind_name_type_and_line():
    registry = build_registry(external="none", extra=[_MisbehavingRewards()])
    rewards = RewardSet.from_sections([RewardSection(name="parse_int")], registry, [None])
    assert rewards(_sample("5", "5"))["parse_int"] == 5.0
    with pytest.raises(PluginCallError) as err:
        rewards(_sample("5x", "5"))
    line = inspect.getsourcelines(_MisbehavingRewards.parse_int)[1] + 2
    assert str(err.value) == (
        'reward function "parse_int" of in-process plugin _MisbehavingRewards raised '
        "ValueError: invalid literal for int() with base 10: '5x' at "
        f"{__file__}:{line} in parse_int")
    e = err.value
    assert (e.kind, e.name, e.plugin, e.error_type) == (
        "reward_function", "parse_int", "_MisbehavingRewards", "ValueError")
    assert e.location == f"{__file__}:{line} in parse_int"
    assert isinstance(e.__cause__, ValueError)


def test_a_reward_that_raises_inside_a_library_also_names_its_own_line():
    registry = build_registry(external="none", extra=[_MisbehavingRewards()])
    rewards = RewardSet.from_sections([RewardSection(name="parse_json")], registry, [None])
    with pytest.raises(PluginCallError) as err:
        rewards(_sample("{", "5"))
    line = inspect.getsourcelines(_MisbehavingRewards.parse_json)[1] + 2
    assert err.value.error_type == "JSONDecodeError"
    assert err.value.location.startswith(json.decoder.__file__ + ":")
    assert err.value.location.endswith(f" (called from {__file__}:{line} in parse_json)")


def test_a_reward_that_returns_no_score_names_the_plugin():
    registry = build_registry(external="none", extra=[_MisbehavingRewards()])
    rewards = RewardSet.from_sections([RewardSection(name="no_score")], registry, [None])
    with pytest.raises(PluginCallError, match=r"^reward function \"no_score\" of in-process "
                       r"plugin _MisbehavingRewards returned a dict without 'score' "
                       r"\(keys: \['parsed'\]\)$"):
        rewards(_sample("5", "5"))
