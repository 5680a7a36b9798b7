"""Model rewards: a discriminative reward model (a tiny Qwen3ForSequenceClassification saved
offline) and the generative judge that asks the rollout engine; both through RewardSet."""

from __future__ import annotations

import asyncio

import pytest
import torch

from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe, RewardSection, TinyModelSection
from rlctl.models.tiny import EOS_ID, build_tiny_reward_model, build_tiny_tokenizer
from rlctl.plugin_errors import PluginCallError
from rlctl.registry import build_registry
from rlctl.rewards.base import RewardInput
from rlctl.rewards.judge import LLMJudgeOptions, parse_score
from rlctl.rewards.reward_model import RewardModelOptions, SequenceClassifierReward
from rlctl.rewards.reward_set import RewardSet


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("tiny-rm")
    build_tiny_reward_model(TinyModelSection(), seed=7).save_pretrained(out)
    return str(out)


def _samples(lengths: list[tuple[int, int]]) -> list[RewardInput]:
    tok = build_tiny_tokenizer()
    gen = torch.Generator().manual_seed(0)
    out = []
    for p_len, r_len in lengths:
        prompt = [1] + torch.randint(4, 32, (p_len - 1,), generator=gen).tolist()
        response = torch.randint(4, 32, (r_len,), generator=gen).tolist()
        if r_len % 2:
            response[-1] = EOS_ID  # some stopped, some truncated
        out.append(RewardInput.from_tokens(tok, prompt_ids=prompt, response_ids=response,
                                           ground_truth={"ground_truth": "3"}, data_source="t",
                                           eos_token_ids=[EOS_ID]))
    return out


def test_scores_equal_a_direct_hf_forward(rm_dir: str) -> None:
    from transformers import AutoModelForSequenceClassification

    samples = _samples([(5, 3), (9, 1), (3, 8), (12, 6), (4, 4)])
    scorer = SequenceClassifierReward(
        RewardModelOptions(path=rm_dir, dtype="float32", micro_batch_size=3))
    got = scorer(samples)
    model = AutoModelForSequenceClassification.from_pretrained(rm_dir, local_files_only=True)
    model.eval()
    want = []
    with torch.no_grad():
        for s in samples:  # one unpadded sequence at a time: no padding question at all
            ids = torch.tensor([list(s.prompt_ids) + list(s.response_ids)])
            want.append(float(model(input_ids=ids).logits[0, 0]))
    assert got == pytest.approx(want, abs=1e-5)
    assert len({round(v, 4) for v in got}) == len(got)  # a real signal, not a constant


def test_a_foreign_vocabulary_is_refused(rm_dir: str) -> None:
    scorer = SequenceClassifierReward(RewardModelOptions(path=rm_dir, dtype="float32"))
    bad = RewardInput(prompt_text="", response_text="", response_ids=(40,), prompt_ids=(1,),
                      ground_truth={}, data_source="t")
    with pytest.raises(ValueError, match="outside its vocabulary of 32"):
        scorer([bad])
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        SequenceClassifierReward(RewardModelOptions(path=rm_dir + "-missing"))


def test_model_rewards_mix_by_weight_with_names_kept(rm_dir: str) -> None:
    registry = build_registry(external="none")
    sections = [RewardSection(name="digits_match"),
                RewardSection(name="reward_model", weight=0.5,
                              options={"path": rm_dir, "dtype": "float32"})]
    options = [None, RewardModelOptions(path=rm_dir, dtype="float32")]
    rules = RewardSet.from_sections(sections, registry, options)
    models = RewardSet.from_sections(sections, registry, options, kind="model")
    assert [t.name for t in rules.terms] == ["digits_match"]
    assert [t.name for t in models.terms] == ["reward_model"]
    samples = _samples([(5, 3), (6, 2)])
    raw = SequenceClassifierReward(RewardModelOptions(path=rm_dir, dtype="float32"))(samples)
    results = models.score_batch(samples)
    assert [r["reward_model"] for r in results] == pytest.approx(raw)
    assert [r["score"] for r in results] == pytest.approx([0.5 * v for v in raw])
    assert RewardSet.from_sections(sections, registry, options, kind="judge").terms == []


def test_a_scorer_that_miscounts_is_named() -> None:
    from rlctl.hookspecs import hookimpl

    class Plugin:
        @hookimpl
        def register_reward_functions(self, register):  # type: ignore[no-untyped-def]
            register("short", lambda options, device: lambda samples: [1.0], kind="model")

    registry = build_registry(external="none", extra=[Plugin()])
    models = RewardSet.from_sections([RewardSection(name="short")], registry, [None],
                                     kind="model")
    with pytest.raises(PluginCallError, match="returned 1 scores for 2 samples"):
        models.score_batch(_samples([(3, 1), (3, 2)]))


@pytest.mark.parametrize(
    ("reply", "score"),
    [("7", 0.7), ("I give it 3, no, 8", 0.8), ("ten", None), ("-2.5", -0.25), ("", None)],
)
def test_judge_reply_parsing(reply: str, score: float | None) -> None:
    assert parse_score(reply, LLMJudgeOptions()) == (pytest.approx(score) if score else None)
    grouped = LLMJudgeOptions(pattern=r"Score: (\d+)", scale=1.0)
    assert parse_score("Score: 4 of 5, Score: 5", grouped) == 5.0


def test_judge_asks_the_rollout_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The judge's question goes through the rollout worker's engine: the reply is the
    engine's greedy answer to the filled-in template, and the score is parsed from it."""
    from rlctl.dataplane import open_data_plane
    from rlctl.trainer.worker.rollout_worker import RolloutWorker, StepRollout

    options = {"template": "{prompt}{response}=", "pattern": r"\d", "scale": 1.0,
               "max_new_tokens": 4, "default": -1.0}
    recipe = Recipe.model_validate({
        "model": {"path": "tiny", "dtype": "float32"}, "run": {"device": "cpu"},
        "data": {"task": "count_digits"},
        "rewards": [{"name": "digits_match"}, {"name": "llm_judge", "weight": 0.5,
                                               "options": options}]})
    plane = open_data_plane("memory", {}, run_id="judge-test")
    worker = RolloutWorker(validate_recipe(recipe), plane)
    worker.ready()
    sample = _samples([(4, 2)])[0]
    judge = worker.judges.terms[0].fn
    step = StepRollout(worker, "train", 0, None)  # type: ignore[arg-type]
    result = asyncio.run(worker.judges.judge(sample, step._ask))

    tok = worker.tokenizer
    ids = tok(judge.judge_prompt(sample))["input_ids"]
    (gen,) = worker.engine.generate_batch([ids], max_new_tokens=4, temperature=0.0)
    reply = tok.decode(gen.token_ids, skip_special_tokens=True)
    want = parse_score(reply, LLMJudgeOptions(**options))
    assert result["llm_judge"] == (want if want is not None else -1.0)
    assert result["llm_judge/parsed"] == float(want is not None)
    assert result["score"] == pytest.approx(0.5 * result["llm_judge"])
    plane.close()
