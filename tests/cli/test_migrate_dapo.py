"""``rlctl config migrate`` for what DAPO and reward-model recipes use: verl's filter_groups and
gen_batch_size, the dapo reward manager's overlong buffer, and reward_model.enable."""

from __future__ import annotations

import tomllib
from pathlib import Path

from inline_snapshot import snapshot

FIX = Path("tests/cli/migrate_fixtures/verl-b178a3cd")
FSDP, MEGATRON = str(FIX / "ppo_trainer.yaml"), str(FIX / "ppo_megatron_trainer.yaml")
GRPO = ["--verl-script", str(FIX / "grpo_fsdp_qwen2-7b.sh"), "--var", "HOME=/data",
        "--train-rows", "7473"]
FILTER = ["+algorithm.filter_groups.enable=True", "+algorithm.filter_groups.metric=acc",
          "+algorithm.filter_groups.max_num_gen_batches=10", "+data.gen_batch_size=1536"]
RM = ["reward_model.enable=True", "reward_model.model.path=/models/rm",
      "reward_model.model.input_tokenizer=null", "reward_model.micro_batch_size_per_gpu=8"]


def _section(text: str, header: str) -> str:
    """One ``[table]`` of the written recipe, comments included."""
    return text.split(f"[{header}]\n", 1)[1].split("\n\n", 1)[0]


def test_dapo_moe_maps_the_overlong_buffer(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    out = tmp_path / "dapo.toml"
    # what rlctl lacks is removed (a warm-up over 4 optimizer steps, a model-config override)
    result = rlctl("config", "migrate", MEGATRON, "--verl-script",
                   str(FIX / "dapo_moe_qwen3-30b_megatron.sh"), "--var", "HOME=/data",
                   "--var", "aime24_test_path=/data/aime-2024.parquet", "--reward", "gsm8k",
                   "--train-rows", "17917", "actor_rollout_ref.actor.optim.lr_warmup_steps=0",
                   "~actor_rollout_ref.model.override_config.model_config.max_position_embeddings",
                   "-o", str(out))
    text = out.read_text()
    assert _section(text, "algorithm.overlong") == snapshot("""\
buffer_len = 4096                       # reward_kwargs.overlong_buffer_cfg.len
penalty_factor = 1.0                    # reward_kwargs.overlong_buffer_cfg.penalty_factor\
""")
    assert [line for line in result.stdout.splitlines()
            if "overlong" in line or "reward_manager" in line] == snapshot([
        (" * reward_model.reward_kwargs.max_resp_len = 8192 -> algorithm.overlong.max_tokens"
        " (= rollout.max_new_tokens, unset)"),
        (" * reward_model.reward_kwargs.overlong_buffer_cfg.enable = true"
        " -> algorithm.overlong.buffer_len"),
        (" * reward_model.reward_kwargs.overlong_buffer_cfg.len = 4096"
        " -> algorithm.overlong.buffer_len"),
        (" * reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor = 1.0"
        " -> algorithm.overlong.penalty_factor"),
        " * reward_model.reward_manager = 'dapo' -> algorithm.overlong",
        (" * reward_model.reward_kwargs.overlong_buffer_cfg.log = false: metrics only:"
        " rlctl always logs reward/overlong"),
    ])
    recipe = tomllib.loads(text)["algorithm"]
    assert (recipe["loss"]["clip_high"], recipe["loss"]["agg"]) == (0.28, "token-mean")
    assert rlctl("config", "validate", "--skip-data", str(out)).stdout.startswith("ok: ")


def test_filter_groups_become_dynamic_sampling(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    out = tmp_path / "ds.toml"
    result = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", *FILTER, "-o", str(out))
    assert _section(out.read_text(), "algorithm.dynamic_sampling") == snapshot("""\
enabled = true                          # algorithm.filter_groups.enable
metric = "gsm8k"                        # algorithm.filter_groups.metric
max_draws = 10                          # algorithm.filter_groups.max_num_gen_batches
prompts_per_draw = 1536                 # data.gen_batch_size (prompts)\
""")
    assert ("   algorithm.filter_groups.metric = acc: rlctl's gsm8k has no `acc`; gsm8k varies in "
            "a group exactly when correctness does") in result.stdout
    assert rlctl("config", "validate", "--skip-data", str(out)).stdout.startswith("ok: ")
    seq = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", *FILTER,
                "algorithm.filter_groups.metric=seq_reward", "-o", str(tmp_path / "seq.toml"))
    assert "algorithm.filter_groups.metric = 'seq_reward' -> algorithm.dynamic_sampling.metric" \
        in seq.stdout
    assert tomllib.loads((tmp_path / "seq.toml").read_text())["algorithm"][
        "dynamic_sampling"]["metric"] == "score"


def test_dynamic_sampling_that_cannot_be_migrated_exits_2(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", *FILTER,
                   "algorithm.filter_groups.max_num_gen_batches=0", "-o", str(out), code=2)
    assert ("algorithm.filter_groups.max_num_gen_batches: 0: verl keeps generating without a "
            "limit; rlctl bounds every wait") in result.stderr
    off = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", *FILTER,
                "algorithm.filter_groups.enable=False", "-o", str(out), code=2)
    assert "\n  data.gen_batch_size: 1536 prompts per step generated and trained on" in off.stderr
    kl = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", *FILTER,
               "algorithm.filter_groups.metric=seq_final_reward", "algorithm.use_kl_in_reward=true",
               "actor_rollout_ref.actor.use_kl_loss=false", "-o", str(out), code=2)
    assert "\n  algorithm.filter_groups.metric: seq_final_reward with the KL in the reward" \
        in kl.stderr
    assert not out.exists()


def test_a_reward_model_becomes_a_model_reward(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    out, report = tmp_path / "rm.toml", tmp_path / "rm.txt"
    result = rlctl("config", "migrate", FSDP, *GRPO, *RM, "-o", str(out), "--report", str(report))
    recipe = tomllib.loads(out.read_text())
    assert recipe["rewards"] == [{"name": "reward_model",
                                  "options": {"path": "/models/rm", "micro_batch_size": 8}}]
    assert "verl returns the reward model's score alone" in result.stdout
    listed = report.read_text()
    for key in ("reward_model.enable = true -> rewards", ("reward_model.model.path = '/models/rm' "
                "-> rewards.options.path"), ("reward_model.micro_batch_size_per_gpu = 8 -> "
                "rewards.options.micro_batch_size"), ("custom_reward_function.path = null: not "
                "called: the reward model scores")):
        assert key in listed, key
    assert rlctl("config", "validate", "--skip-data", str(out)).stdout.startswith("ok: ")


def test_a_reward_model_on_its_own_chat_template_exits_2(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    out = tmp_path / "x.toml"
    result = rlctl("config", "migrate", FSDP, *GRPO, *RM[:2], "-o", str(out), code=2)
    assert "\n  reward_model.model.input_tokenizer: " in result.stderr
    assert "set reward_model.model.input_tokenizer=null when the reward model shares" \
        in result.stderr
    assert not out.exists()


def test_the_dapo_recipe_configs_overlong_buffer_is_read_too(  # type: ignore[no-untyped-def]
    rlctl, tmp_path: Path,
) -> None:
    # verl's DAPO recipe config keeps the buffer under reward_model.overlong_buffer, and its
    # end at the response length (data.max_response_length, 1024 in the GRPO script)
    out = tmp_path / "ob.toml"
    rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k", "reward_model.reward_manager=dapo",
          "+reward_model.overlong_buffer.enable=True", "+reward_model.overlong_buffer.len=256",
          "+reward_model.overlong_buffer.penalty_factor=0.5",
          "+reward_model.overlong_buffer.log=True", "-o", str(out))
    assert tomllib.loads(out.read_text())["algorithm"]["overlong"] == {
        "buffer_len": 256, "penalty_factor": 0.5}
    too_long = rlctl("config", "migrate", FSDP, *GRPO, "--reward", "gsm8k",
                     "reward_model.reward_manager=dapo",
                     "+reward_model.overlong_buffer.enable=True",
                     "+reward_model.overlong_buffer.len=4096",
                     "+reward_model.overlong_buffer.penalty_factor=1.0",
                     "-o", str(tmp_path / "x.toml"), code=2)
    assert "\n  reward_model.overlong_buffer.len: 4096 tokens, longer than max_resp_len 1024" \
        in too_long.stderr
