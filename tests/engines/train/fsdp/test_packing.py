"""Token-budget micro-batches and packed sequences give the padded forward's numbers.

Tolerances (float32 on CPU; the layouts change shapes, so sums round in another order): per
token log-probs and entropy within 2e-6 absolute (seen: <= 7e-7), values within 1e-5 (seen:
<= 2e-6), and after one SGD step with lr 1 and no clipping, where the weight change is the
gradient itself, weights within 1e-6 (seen: <= 1.5e-7) of the padded layout's.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from rlctl.engines.train.batch import ModelBatch
from rlctl.engines.train.log_probs import token_log_probs
from rlctl.engines.train.packing import pack, sample_lengths, token_budget_groups
from rlctl.models.loading import load_causal_lm
from rlctl.ports import free_port
from tests.engines.train.fsdp import packing_workers as pw

LOGP_ATOL, VALUE_ATOL, GRAD_ATOL = 2e-6, 1e-5, 1e-6


def test_budget_groups_cover_every_row_once_within_the_budget() -> None:
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(1, 20, (200,), generator=g).tolist()
    responses = torch.randint(1, 160, (200,), generator=g).tolist()
    for packed in (False, True):
        groups = token_budget_groups(prompts, responses, 512, packed=packed)
        rows = sorted(int(i) for grp in groups for i in grp)
        assert rows == list(range(200))
        for grp in groups:
            p = [prompts[i] for i in grp]
            r = [responses[i] for i in grp]
            cost = sum(p) + sum(r) if packed else len(grp) * (max(p) + max(r))
            assert cost <= 512, (packed, cost)
        # longest first, greedy: every group but the last is full enough to refuse its next row
        assert len(groups) <= 1 + sum(prompts[i] + responses[i] for i in range(200)) // 256


def test_a_row_longer_than_the_budget_runs_alone() -> None:
    groups = token_budget_groups([4, 4, 4], [10, 300, 10], 100, packed=True)
    assert [g.tolist() for g in groups] == [[1], [0, 2]]


def test_pack_restarts_positions_and_points_at_the_tokens_before_each_response_token() -> None:
    batch = ModelBatch.from_samples([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]], pad_id=0)
    pk = pack(batch)
    assert pk.input_ids.tolist() == [[5, 6, 7, 9, 10, 8, 11, 12, 13]]
    assert pk.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 3]]
    # response token 9 follows 7 (column 2); 11 follows 8 (column 5)
    assert pk.logit_index.tolist() == [2, 3, 5, 6, 7]
    assert pk.targets.tolist() == [9, 10, 11, 12, 13]
    assert pk.scatter(torch.arange(5.0)).tolist() == [[0, 1, 0], [2, 3, 4]]
    assert sample_lengths(batch) == ([3, 1], [2, 3])


@pytest.mark.parametrize("attention", ["transformers block mask", "rlctl varlen"])
def test_a_packed_forward_equals_one_forward_per_sample(attention) -> None:
    """No sample of a packed row sees another: with transformers' own packing (sdpa reads
    the restarting position ids as a block-diagonal causal mask) and with rlctl's per-sample
    attention (varlen_attention.py, what the engine uses)."""
    from rlctl.engines.train.varlen_attention import use_varlen_attention

    batch, _ = pw.variable_batch(8)
    model = load_causal_lm(pw.recipe({}).model, seed=3).eval()
    reference = load_causal_lm(pw.recipe({}).model, seed=3).eval()
    pk = pack(batch)
    extra = {}
    if attention == "rlctl varlen":
        use_varlen_attention(model)
        extra = {"cu_seq_lens_q": pk.bounds}
    with torch.no_grad():
        logits = model(input_ids=pk.input_ids, position_ids=pk.position_ids, use_cache=False,
                       logits_to_keep=pk.logit_index, **extra).logits
        packed = pk.scatter(token_log_probs(logits, pk.targets[None], 1.0, False)[0][0])
        for i in range(batch.batch_size):
            width = batch.prompt_width
            prompt = batch.input_ids[i, :width][batch.attention_mask[i, :width].bool()]
            resp = batch.responses[i][batch.response_mask[i].bool()]
            alone = reference(torch.cat([prompt, resp])[None]).logits[0, len(prompt) - 1 : -1]
            want, _ = token_log_probs(alone[None], resp[None], 1.0, False)
            torch.testing.assert_close(packed[i, : len(resp)], want[0], atol=LOGP_ATOL, rtol=0)


def test_the_varlen_attention_refuses_an_unpacked_forward() -> None:
    from rlctl.engines.train.varlen_attention import use_varlen_attention

    model = load_causal_lm(pw.recipe({}).model, seed=3).eval()
    use_varlen_attention(model)
    with pytest.raises(RuntimeError, match="runs packed rows only"):
        model(input_ids=torch.tensor([[5, 6, 7]]))


@pytest.fixture(scope="module", params=[1, 2], ids=["1 rank", "2 ranks"])
def layouts(request, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"packing{world}") / "results.pt"
    mp.spawn(pw.worker, args=(world, free_port(), str(out)), nprocs=world, join=True)
    return torch.load(out, weights_only=False)


@pytest.mark.parametrize("layout", ["shared", "budget", "packed", "packed_budget"])
def test_layout_gives_the_padded_log_probs_values_and_gradients(layouts, layout) -> None:
    base, got = layouts["padded"], layouts[layout]
    torch.testing.assert_close(got["log_probs"], base["log_probs"], atol=LOGP_ATOL, rtol=0)
    torch.testing.assert_close(got["entropy"], base["entropy"], atol=LOGP_ATOL, rtol=0)
    torch.testing.assert_close(got["values"], base["values"], atol=VALUE_ATOL, rtol=0)
    assert got["loss"] == pytest.approx(base["loss"], abs=1e-6)
    for key in ("weights", "critic_weights"):
        for name, w in base[key].items():
            torch.testing.assert_close(got[key][name], w, atol=GRAD_ATOL, rtol=0)
    # the comparison is not vacuous: the SGD step moved the weights
    init = load_causal_lm(pw.recipe({}).model, seed=3).state_dict()
    assert max((base["weights"][k] - init[k]).abs().max().item() for k in init) > 1e-3


def test_a_budget_below_the_longest_sample_is_a_recipe_problem() -> None:
    from rlctl.config.pipeline import validate_recipe
    from rlctl.config.problems import ConfigError
    from rlctl.config.recipe import Recipe

    def recipe(budget: int) -> Recipe:
        return Recipe.model_validate({
            "data": {"task": "count_digits", "max_prompt_tokens": 32},
            "rollout": {"max_new_tokens": 8}, "rewards": [{"name": "digits_match"}],
            "engines": {"train": {"options": {"packing": True,
                                              "log_prob_max_tokens_per_micro_batch": budget}}},
            "resources": {"mode": "local"}, "data_plane": {"backend": "memory"},
        })

    validate_recipe(recipe(40))  # 32 + 8 fits
    with pytest.raises(ConfigError) as err:
        validate_recipe(recipe(39))
    (problem,) = err.value.problems
    assert problem.path == "engines.train.options.log_prob_max_tokens_per_micro_batch"
    assert "40 tokens" in problem.message and "at least 40" in problem.fix
