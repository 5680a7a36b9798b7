"""loss_mask end to end through the real worker write path, and rewards across outputs.

A scripted agent loop emits known outputs (observation holes, several outputs per session);
the rollout worker writes them to a memory data plane exactly as in a run; the advantage
phase and the training worker's batch builder then read them back.
"""

from __future__ import annotations

import types

import pytest
import torch

from rlctl.agents.contract import AgentLoop, AgentOutput, EpisodeError
from rlctl.algorithms.staleness import policy_of
from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.dataplane.memory import MemoryDataPlane
from rlctl.dataplane.replay_buffer import ReplayBuffer
from rlctl.engines.rollout.contract import Generation, SamplingParams
from rlctl.hookspecs import hookimpl
from rlctl.registry import build_registry, get_registry, set_registry
from rlctl.trainer.controller.prompts import PromptFeeder
from rlctl.trainer.plan import build_plan
from rlctl.trainer.worker.advantage_phase import run_advantage_phase
from rlctl.trainer.worker.rollout_worker import RolloutWorker
from rlctl.trainer.worker.training_worker import TrainingWorker

# session -> outputs as (response ids, loss mask, score); session 1 emits two outputs
SCRIPT = {
    0: [([5, 6, 7, 8, 2], [1, 1, 0, 1, 1], 1.0)],
    1: [([5, 6], [1, 1], None), ([7, 2], [1, 1], 0.0)],
    2: [([9, 9, 9, 2], [1, 0, 0, 1], 0.5)],
}


class ScriptedOutputs(AgentLoop):

    async def run(self, prompt, session_id, sampling, generate):
        return [
            AgentOutput(
                list(prompt.prompt_ids),
                ids,
                [-0.1] * len(ids),
                "stop",
                0,
                loss_mask=mask,
                extra={"r": score},
            )
            for ids, mask, score in SCRIPT[session_id]
        ]


class SteppedOutputs(ScriptedOutputs):
    """Session 0's output with two per-step rewards of 0.5, for every session."""

    async def run(self, prompt, session_id, sampling, generate):
        [out] = await super().run(prompt, 0, sampling, generate)
        out.token_rewards = [0.0, 0.5, 0.0, 0.0, 0.5]
        return [out]


class FailingEpisodes(ScriptedOutputs):
    """Session 1 fails with its outputs, session 2 before recording any (scored 0)."""

    async def run(self, prompt, session_id, sampling, generate):
        outs = await super().run(prompt, session_id, sampling, generate)
        if session_id == 0:
            return outs
        metrics = {"episode_errors": 1.0}
        raise EpisodeError(f"framework error {session_id}", outs if session_id == 1 else [],
                           metrics)


def scripted_reward(sample, **options):
    return float(sample.extra["r"])


@pytest.fixture
def plugins():
    module = types.ModuleType("rlctl_test_scripted")

    @hookimpl
    def register_agent_loops(register):
        register("scripted", ScriptedOutputs)
        register("stepped", SteppedOutputs)
        register("failing", FailingEpisodes)

    @hookimpl
    def register_reward_functions(register):
        register("scripted_reward", scripted_reward)

    module.register_agent_loops = register_agent_loops
    module.register_reward_functions = register_reward_functions
    set_registry(build_registry(extra=[module]))
    yield
    set_registry(None)


def rollout(estimator: str, loop: str = "scripted", **algorithm):
    loaded, plane, _, meta, counts = rollout_with_prompts(estimator, loop, **algorithm)
    return loaded, plane, meta, counts


def rollout_with_prompts(estimator: str, loop: str = "scripted", rewards=None, **algorithm):
    recipe = Recipe.model_validate(
        {
            "model": {"path": "tiny", "dtype": "float32"},
            "data": {"task": "count_digits"},
            "algorithm": {
                "estimator": estimator,
                "group_size": 3,
                "prompts_per_step": 2,
                **algorithm,
            },
            "rollout": {"agent_loop": loop, "max_new_tokens": 4},
            "rewards": rewards or [{"name": "scripted_reward"}],
            "engines": {"train": {"micro_batch_size": 6}},
            "data_plane": {"backend": "memory"},
            "resources": {"mode": "local"},
        }
    )
    plane = MemoryDataPlane()
    loaded = validate_recipe(recipe)
    worker = RolloutWorker(loaded, plane)
    worker.ready()
    prompts = PromptFeeder(
        recipe, worker.tokenizer, plane, task_options=loaded.options_for("data.task_options")
    ).next_batch(2, partition="train", global_step=1, n=3)
    replay = ReplayBuffer(plane)
    replay.add("train", [(u, 3, 1) for u in prompts.keys])
    counts = worker.generate(prompts, "train", 1, SamplingParams(4), 3)
    meta = replay.sample("train", 1, timeout=5)
    return loaded, plane, prompts, meta, counts


def advantages(plane, meta, loaded):
    return run_advantage_phase(
        plane, meta, loaded.recipe, get_registry(), kl_coef=0.0,
        options=loaded.option_kwargs("algorithm.estimator_options"),
    )


def test_outputs_carry_their_loss_mask_and_generated_length(plugins):
    _, plane, meta, counts = rollout("grpo")
    assert counts == {"outputs": 8.0, "failures": 0.0, "idle_s": 0.0}
    assert [k.split("_", 1)[1] for k in meta.keys[:4]] == ["0_0", "1_0", "1_1", "2_0"]
    td = plane.kv_batch_get(list(meta.keys[:4]), "train", ["loss_mask", "score"])
    assert [r.tolist() for r in td["loss_mask"].unbind()] == [
        m for s in SCRIPT.values() for _, m, _ in s
    ]
    assert [t["loss_tokens"] for t in meta.tags[:4]] == [4, 2, 2, 2]
    assert [t["response_len"] for t in meta.tags[:4]] == [5, 2, 2, 4]
    # session 1's first output carries the score of the session's last output
    assert td["score"].tolist() == [1.0, 0.0, 0.0, 0.5]


def test_advantages_skip_observations_and_count_each_session_once(plugins):
    loaded, plane, meta, _ = rollout("grpo")
    partials = advantages(plane, meta, loaded)
    td = plane.kv_batch_get(list(meta.keys[:4]), "train", ["advantages"])
    adv = [r for r in td["advantages"].unbind()]
    scores = torch.tensor([1.0, 0.0, 0.5])  # one score per session
    want = (scores - scores.mean()) / (scores.std() + 1e-6)
    masks = [torch.tensor(m, dtype=torch.float32) for s in SCRIPT.values() for _, m, _ in s]
    for got, mask, value in zip(adv, masks, [want[0], want[1], want[1], want[2]], strict=True):
        torch.testing.assert_close(got, value * mask)  # zero on observation tokens
    # response_length counts generated tokens only
    s, c, lo, hi = partials["response_length"]
    assert (s / c, lo, hi) == (10 / 4, 2, 4)


def test_training_batch_masks_observations_for_every_loss(plugins):
    loaded, plane, meta, _ = rollout("grpo")
    advantages(plane, meta, loaded)
    plan = build_plan(loaded, get_registry(), policy_of(loaded))
    trainer = TrainingWorker(loaded, plane, plan)
    trainer.pad_id = 0
    batch, fields, lengths, _ = trainer._model_batch(meta.select([0, 3]), ["advantages"], pad_to=3)
    want = torch.tensor([[1, 1, 0, 1, 1], [1, 0, 0, 1, 0], [0, 0, 0, 0, 0]], dtype=torch.float32)
    torch.testing.assert_close(fields["response_mask"], want)
    torch.testing.assert_close(batch.response_mask, want)  # engines zero log-probs there too
    assert lengths == [5, 4]
    # the training sequence is the prompt, then every response token (generated or observed)
    assert batch.responses[0].tolist() == [5, 6, 7, 8, 2]


def test_per_step_rewards_reach_a_discounting_estimator(plugins):
    loaded, plane, meta, _ = rollout("reinforce_plus_plus", loop="stepped", gamma=0.5)
    advantages(plane, meta, loaded)
    td = plane.kv_batch_get([meta.keys[0]], "train", ["returns"])
    # score 1.0 = the two step rewards: nothing is left for the last token. G_t, gamma 0.5,
    # over the generated tokens [0, 0.5, (observation), 0, 0.5]:
    torch.testing.assert_close(
        td["returns"].unbind()[0], torch.tensor([0.25 + 0.0625, 0.5 + 0.125, 0.0, 0.25, 0.5])
    )


def test_overlong_shaping_counts_generated_tokens_only(plugins):
    # max_tokens 4, buffer 2: no penalty up to 2 tokens, -1 at 4 (penalty_factor 1)
    _, plane, meta, _ = rollout("grpo", overlong={"buffer_len": 2, "max_tokens": 4})
    td = plane.kv_batch_get(list(meta.keys[:4]), "train", ["reward/overlong", "score"])
    # generated tokens [4, 2, 2, 2]; counting the observations too (response_len [5, 2, 2, 4])
    # would punish session 0 by 1.5 and session 2 by 1
    assert td["reward/overlong"].tolist() == [-1.0, 0.0, 0.0, 0.0]
    assert td["score"].tolist() == [0.0, 0.0, 0.0, 0.5]


def test_dynamic_sampling_takes_one_value_per_session(plugins):
    from rlctl.trainer.worker.group_filter import varied_groups

    _, plane, meta, _ = rollout("grpo")
    first, second = dict.fromkeys(meta.tag_values("uid"))
    assert varied_groups(plane, meta, "score") == [first, second]  # sessions: 1.0, 0.0, 0.5
    # session 1 of the first prompt alone: one session (a group of one is kept), although
    # its two outputs carry the same score
    one = meta.select(lambda key, tags: tags["uid"] == first and "_1_" in key[len(first):])
    assert len(one) == 2
    assert varied_groups(plane, one, "score") == [first]


def test_a_reward_model_scores_each_session_once(plugins, tmp_path):
    from rlctl.config.recipe import TinyModelSection
    from rlctl.models.tiny import build_tiny_reward_model
    from rlctl.rewards.base import RewardInput
    from rlctl.rewards.reward_model import RewardModelOptions, SequenceClassifierReward
    from rlctl.trainer.worker.reward_worker import RewardWorker

    build_tiny_reward_model(TinyModelSection(), seed=7).save_pretrained(tmp_path)
    model = {"path": str(tmp_path), "dtype": "float32"}
    rewards = [{"name": "scripted_reward"}, {"name": "reward_model", "options": model}]
    loaded, plane, prompts, meta, _ = rollout_with_prompts("grpo", rewards=rewards)
    worker = RewardWorker(loaded, plane)
    worker.ready()
    worker.score(meta, prompts.partition_id)
    keys = list(meta.keys[:4])  # sessions 0, 1 (two outputs), 2 of the first prompt
    td = plane.kv_batch_get(keys, "train", ["prompt_ids", "response_ids", "reward/reward_model"])
    got = td["reward/reward_model"].tolist()
    # the model reads each session's last output, observations included, once
    prompt_rows, response_rows = td["prompt_ids"].unbind(), td["response_ids"].unbind()
    last = [RewardInput.from_tokens(worker.tokenizer, prompt_ids=prompt_rows[i].tolist(),
                                    response_ids=response_rows[i].tolist(), ground_truth={},
                                    data_source="t", eos_token_ids=worker.eos_ids)
            for i in (0, 2, 3)]
    want = SequenceClassifierReward(RewardModelOptions(**model))(last)
    assert got == pytest.approx([want[0], want[1], want[1], want[2]], abs=1e-5)
    assert len({round(v, 4) for v in want}) == 3  # a real signal, not a constant


def test_failed_episodes_are_written_scored_zero_and_reward_models_skip_them(plugins, tmp_path):
    from rlctl.config.recipe import TinyModelSection
    from rlctl.models.tiny import build_tiny_reward_model
    from rlctl.trainer.worker.reward_worker import RewardWorker

    build_tiny_reward_model(TinyModelSection(), seed=7).save_pretrained(tmp_path)
    rewards = [{"name": "scripted_reward"},
               {"name": "reward_model", "options": {"path": str(tmp_path), "dtype": "float32"}}]
    loaded, plane, prompts, meta, counts = rollout_with_prompts("grpo", "failing",
                                                                rewards=rewards)
    assert counts["failures"] == 0  # nothing failed the step
    worker = RewardWorker(loaded, plane)
    worker.ready()
    worker.score(meta, prompts.partition_id)
    uid = meta.tags[0]["uid"]
    keys = [k for k in meta.keys if k.startswith(uid)]
    assert [k.removeprefix(uid) for k in keys] == ["_0_0", "_1_0", "_1_1", "_2_0"]
    td = plane.kv_batch_get(keys, "train", ["prompt_ids", "response_ids", "loss_mask", "score",
                                            "reward/scripted_reward", "reward/reward_model"])
    tags = dict(zip(meta.keys, meta.tags, strict=True))
    # session 0 scored as usual; sessions 1 (its two outputs) and 2 score 0, every part 0
    assert td["score"][1:].tolist() == [0.0, 0.0, 0.0] and td["score"][0] != 0.0
    assert td["reward/scripted_reward"][1:].tolist() == [0.0] * 3
    assert td["reward/reward_model"][1:].tolist() == [0.0] * 3
    assert [tags[k].get("episode_error") for k in keys] == [
        None, "framework error 1", "framework error 1", "framework error 2"]
    # session 2 recorded nothing: the prompt and one masked eos, so its group still counts
    eos = worker.tokenizer.eos_token_id
    assert td["response_ids"][3].tolist() == [eos] and td["loss_mask"][3].tolist() == [0]
    assert td["prompt_ids"][3].tolist() == td["prompt_ids"][0].tolist()
    assert tags[keys[3]]["agent/episode_errors"] == 1.0


def test_the_single_turn_batch_hands_a_failed_generate_to_every_session() -> None:
    """run_batch (one generate for a call's sessions): a failing batch is every session's
    failure, as the queued per-session requests were; one failing request only its own."""
    import asyncio

    from rlctl.agents.contract import PromptRecord
    from rlctl.agents.single_turn import SingleTurnAgentLoop

    recs = [PromptRecord(uid=f"u{i}", prompt_ids=[1, 5 + i], ground_truth={}, data_source="t")
            for i in range(2)]
    requests = [(recs[0], 0), (recs[0], 1), (recs[1], 0)]

    async def broken(prompts, sampling):
        raise RuntimeError("engine gone")

    def run_batch(generate_many):
        return asyncio.run(SingleTurnAgentLoop().run_batch(
            requests, SamplingParams(2), None, generate_many, session_timeout_s=5.0))

    out = run_batch(broken)
    assert [str(o) for o in out] == ["engine gone"] * 3

    def gen():
        return Generation([7], [-0.5], "stop", 3)

    async def one_fails(prompts, sampling):
        return [gen(), ValueError("request 1 refused"), gen()]

    out = run_batch(one_fails)
    assert isinstance(out[1], ValueError)
    assert [o[0].response_ids for o in (out[0], out[2])] == [[7], [7]]
    assert out[2][0].prompt_ids == [1, 6] and out[2][0].weight_version == 3
