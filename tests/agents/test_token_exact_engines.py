"""For each rollout engine: the training sequence is what the engine generated plus the
observation tokens, in order, and stop tokens end a turn (kept).

hf runs here; vllm and sglang run when their environments are built
(``rlctl engines install vllm sglang``), otherwise they are skipped with the reason. All
three serve the same tiny checkpoint (:mod:`rlctl.testing.server_checkpoint`).
"""

from __future__ import annotations

import asyncio

import pytest

from rlctl.agents.contract import PromptRecord
from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.server.engine_envs import built_env_python
from rlctl.engines.train.batch import ModelBatch
from rlctl.registry import get_registry
from rlctl.testing.server_checkpoint import save_server_checkpoint, server_tiny_recipe
from tests.agents.agent_helpers import TOK, build_loop

BACKENDS = [
    pytest.param("hf", id="hf"),
    *[
        pytest.param(
            name,
            id=name,
            marks=[
                pytest.mark.slow,
                pytest.mark.heavy,  # a server of its own, again: minutes each on 2 cores
                pytest.mark.timeout(900),
                pytest.mark.skipif(
                    built_env_python(name) is None,
                    reason=f"needs the {name} env: rlctl engines install {name}",
                ),
            ],
        )
        for name in ("vllm", "sglang")
    ],
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return str(save_server_checkpoint(tmp_path_factory.mktemp("server-tiny")))


@pytest.fixture
def engine(request, checkpoint):
    backend = request.param
    options = (
        {} if backend == "hf" else {"python": built_env_python(backend), "startup_timeout_s": 600}
    )
    loaded = validate_recipe(server_tiny_recipe(backend, checkpoint, **options))
    engine = get_registry().load("rollout_engine", backend)(RolloutEngineSpec.from_loaded(loaded))
    engine.load()
    yield engine
    engine.close()


class Recording:
    """The engine's generate, keeping every (request, generation)."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    async def __call__(self, prompt_ids, sampling):
        gen = await self.engine.generate(prompt_ids, sampling)
        self.calls.append((list(prompt_ids), gen))
        return gen


def env_recipe() -> Recipe:
    return Recipe.model_validate(
        {
            "model": {"path": "tiny", "dtype": "float32"},
            "data": {"task": "guess_digit"},
            "rollout": {
                "agent_loop": "env",
                "max_new_tokens": 3,
                "environment": {"name": "guess_digit", "options": {"end_on_invalid": False}},
                "agent_loop_options": {"max_turns": 3},
            },
        }
    )


@pytest.mark.parametrize("engine", BACKENDS, indirect=True)
def test_training_sequence_is_generated_plus_observation_tokens(engine):
    loop = build_loop(env_recipe())
    recorders = [Recording(engine) for _ in range(6)]
    records = [PromptRecord(f"u{i}", [1, 29], {"ground_truth": str(i)}, "t") for i in range(6)]

    async def run_all():
        return await asyncio.gather(
            *(
                loop.run(rec, 0, SamplingParams(3, temperature=1.0), r)
                for rec, r in zip(records, recorders, strict=True)
            )
        )

    results = asyncio.run(run_all())
    turns = 0
    for [out], rec in zip(results, recorders, strict=True):
        sequence = out.prompt_ids + out.response_ids
        position = len(out.prompt_ids)
        for context, gen in rec.calls:
            turns += 1
            # the request is the sequence so far, as is: earlier turns never re-tokenized
            assert len(context) >= position and context == sequence[: len(context)]
            assert sequence[len(context) : len(context) + len(gen.token_ids)] == gen.token_ids
            assert out.loss_mask[len(context) - len(out.prompt_ids) :][: len(gen.token_ids)] == [
                1
            ] * len(gen.token_ids)
            position = len(context) + len(gen.token_ids)
        # every other response token is an observation the environment produced
        generated = [t for t, m in zip(out.response_ids, out.loss_mask, strict=True) if m]
        assert generated == [t for _, g in rec.calls for t in g.token_ids]
        observed = [t for t, m in zip(out.response_ids, out.loss_mask, strict=True) if not m]
        assert set(TOK.decode(observed)) <= set("+-?")
        # and the trainer's batch row is exactly that sequence
        batch = ModelBatch.from_samples([out.prompt_ids], [out.response_ids], pad_id=0)
        assert batch.input_ids[0][batch.attention_mask[0].bool()].tolist() == sequence
    assert turns > len(results)  # multi-turn episodes happened


@pytest.mark.parametrize("engine", BACKENDS, indirect=True)
def test_a_stop_token_ends_the_response_and_is_kept(engine):
    stop = TOK.convert_tokens_to_ids("5")

    async def run_all():
        sampling = SamplingParams(12, temperature=1.0, stop_token_ids=(stop,))
        return await asyncio.gather(
            *(engine.generate([1, 5 + i % 9, 14], sampling) for i in range(24))
        )

    gens = asyncio.run(run_all())
    stopped = [g for g in gens if stop in g.token_ids]
    assert stopped, "no sample drew the stop token in 24 x 12 tokens"
    for g in stopped:
        assert g.token_ids.index(stop) == len(g.token_ids) - 1 and g.finish_reason == "stop"
        assert len(g.log_probs) == len(g.token_ids)
