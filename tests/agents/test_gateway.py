"""The openai_agent loop and its gateway with the hf engine, driven by the real ``openai``
client on a CPU: token exactness, outputs, limits, sessions."""

from __future__ import annotations

import asyncio

import openai
import pytest

import tests.agents.agent_functions as fns
from rlctl.agents.contract import EpisodeError, PromptRecord
from rlctl.agents.gateway import Gateway
from rlctl.agents.observation import chat_delta_ids
from rlctl.config.pipeline import validate_recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.models.loading import load_tokenizer
from tests.agents.agent_helpers import build_loop, recipe


@pytest.fixture(scope="module")
def setup(chat_model_dir):
    engines = {}

    def make(agent: str, **options):
        r = recipe(agent_loop="openai_agent", agent_loop_options={"agent": agent, **options})
        r = r.model_copy(update={"model": r.model.model_copy(update={"path": str(chat_model_dir)})})
        tok = load_tokenizer(r.model)
        if "engine" not in engines:  # one model for the module
            engines["engine"] = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(r)))
            engines["engine"].load()
        return build_loop(r, tok), tok, engines["engine"]

    return make


def episode(loop, engine, prompt="what is 6*7?", session_id=0):
    rec = PromptRecord("u1", [1, 2], {"ground_truth": "42"}, "test", prompt=prompt)
    return asyncio.run(
        loop.run(rec, session_id, SamplingParams(6, temperature=1.0), engine.generate))


def test_an_episode_is_the_engines_tokens_plus_the_rendered_new_messages(setup):
    loop, tok, engine = setup("tests.agents.agent_functions:two_turns")
    [out] = episode(loop, engine)
    record, (first, second) = fns.SEEN[-1]
    assert record.prompt == "what is 6*7?" and record.ground_truth == {"ground_truth": "42"}
    gen1, gen2 = first.model_extra["rlctl"]["token_ids"], second.model_extra["rlctl"]["token_ids"]
    # the prompt: the first request rendered with the chat template and its tools
    want_prompt = tok.apply_chat_template(
        [{"role": "user", "content": "what is 6*7?"}],
        tools=[fns.CALCULATOR],
        tokenize=True,
        add_generation_prompt=True,
        return_dict=False,
    )
    assert out.prompt_ids == list(want_prompt)
    # turn 2 appends only the new message, after the engine's own tokens of turn 1 (and the
    # end-of-turn token when turn 1 was cut by max_tokens)
    obs = chat_delta_ids(tok, [{"role": "user", "content": "and 6*8?"}])
    if gen1[-1] != tok.eos_token_id:
        obs = [tok.eos_token_id, *obs]
    assert out.response_ids == gen1 + obs + gen2
    assert out.loss_mask == [1] * len(gen1) + [0] * len(obs) + [1] * len(gen2)
    logprobs = [c.logprob for c in first.choices[0].logprobs.content]
    assert out.rollout_log_probs[: len(gen1)] == pytest.approx(logprobs)
    assert out.extra["weight_versions"] == [0, 0] and out.extra["agent_reward"] == 1.0
    assert out.reward_ids == gen2 and out.num_turns == 2
    assert first.usage.completion_tokens == len(gen1)
    assert out.metrics["episode_errors"] == 0 and out.metrics["malformed_tool_calls"] == 0
    assert loop.json_schema is False  # the hf engine does not constrain decoding


def test_a_changed_history_starts_a_new_output(setup):
    loop, tok, engine = setup("tests.agents.agent_functions:summarising")
    outs = episode(loop, engine)
    assert len(outs) == 2 and all(o.extra["agent_reward"] == 0.5 for o in outs)
    assert tok.decode(outs[1].prompt_ids).startswith("<|im_start|>user\nsummary: ")
    assert all(o.metrics["outputs"] == 2 for o in outs)


def test_the_turn_limit_scores_the_episode_zero_or_fails_it(setup):
    loop, _, engine = setup("tests.agents.agent_functions:greedy", max_turns=3)
    with pytest.raises(EpisodeError, match="turn limit") as err:
        episode(loop, engine)
    # the three turns it took are kept (scored 0 by the rollout worker), the error counted
    [out] = err.value.outputs
    assert out.num_turns == 3 and err.value.metrics["episode_errors"] == 1
    assert err.value.metrics["refused_requests"] == 1
    loop, _, engine = setup("tests.agents.agent_functions:greedy", max_turns=3,
                            on_episode_error="fail")
    with pytest.raises(openai.BadRequestError, match="turn limit"):
        episode(loop, engine)


def test_unknown_sessions_are_refused_and_the_server_binds_loopback(setup):
    _, tok, engine = setup("tests.agents.agent_functions:two_turns")

    async def scenario():
        gateway = Gateway(tok, engine.generate)
        await gateway.start()
        try:
            assert gateway.base_url.startswith("http://127.0.0.1:")
            assert all(host == "127.0.0.1" for host, _ in gateway._runner.addresses)
            session = gateway.open(SamplingParams(4), max_turns=2, max_total_tokens=64)
            good = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=session.key, max_retries=0)
            bad = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="guess", max_retries=0)
            with pytest.raises(openai.AuthenticationError):
                await bad.chat.completions.create(
                    model="policy", messages=[{"role": "user", "content": "x"}]
                )
            gateway.close(session)
            with pytest.raises(openai.AuthenticationError):  # a closed episode's key is dead
                await good.chat.completions.create(
                    model="policy", messages=[{"role": "user", "content": "x"}]
                )
            await good.close()
            await bad.close()
        finally:
            await gateway.stop()

    asyncio.run(scenario())


def test_an_episode_past_its_timeout_fails_and_its_turn_in_flight_is_cancelled(setup):
    loop, _, _ = setup("tests.agents.agent_functions:one_request", episode_timeout_s=0.5)
    seen = []

    async def hung(prompt_ids, sampling):  # an engine that never answers this request
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    rec = PromptRecord("u1", [1, 2], {}, "test", prompt="q")
    with pytest.raises(EpisodeError, match="episode_timeout_s"):
        asyncio.run(loop.run(rec, 0, SamplingParams(6), hung))
    assert seen == ["cancelled"]  # stopping the gateway did not wait for it
