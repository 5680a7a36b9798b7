"""``rlctl config validate | show | schema`` end to end (exit codes, stdout/stderr split)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from inline_snapshot import snapshot

from rlctl.config.recipe import Recipe
from tests.cli.cli_helpers import DATA

SMALL = str(DATA / "small.toml")


def test_validate_good_recipe(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "validate", SMALL)
    assert result.stdout == snapshot('ok: small: grpo on tiny (task count_digits), 8 prompts x 4 = 32 samples/step, 2 optimizer steps/step, fsdp x2 + hf, ray data plane, 100 steps\n')
    assert result.stderr == ""


def test_validate_notes_streaming_without_correction(rlctl) -> None:  # type: ignore[no-untyped-def]
    stream = ("-s", "algorithm.staleness.policy=bounded",
              "-s", "algorithm.staleness.options.max_staleness=2")
    # the default correction ("auto") corrects a streaming recipe: nothing to note
    assert rlctl("config", "validate", SMALL, *stream).stderr == ""
    result = rlctl("config", "validate", SMALL, *stream, "-s", "algorithm.correction.method=none")
    assert result.stdout.startswith("ok: small")
    assert "up to 2 weight update(s) old with no off-policy correction" in result.stderr
    assert "decoupled_ppo" in result.stderr
    corrected = rlctl("config", "validate", SMALL, *stream,
                      "-s", "algorithm.correction.method=masked_is")
    assert corrected.stderr == ""


def test_validate_bad_recipe_lists_every_problem(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "validate", str(DATA / "bad.toml"), code=2)
    assert result.stdout == ""
    assert result.stderr == snapshot("""\
error: the recipe has 7 problems:
  algorithm.kl.in: "sometimes" is not allowed  [from tests/cli/recipes/bad.toml]
      fix: use one of the valid values: loss, none, reward
  algorithm.group_sise: unknown key "group_sise" in [algorithm]  [from tests/cli/recipes/bad.toml]
      fix: did you mean "group_size"?
  engines.train.micro_batch_size: 0 is out of range (must be > 0)  [from tests/cli/recipes/bad.toml]
      fix: use a value > 0; the default is micro_batch_size = 8
  engines.train.options.mixed_precison: unknown key "mixed_precison" in [engines.train.options]  [from tests/cli/recipes/bad.toml]
      fix: did you mean "mixed_precision"?
  data_plane.backend: no data plane named "redis" is registered  [from tests/cli/recipes/bad.toml]
      fix: use one of the valid data planes: memory, ray, transferqueue, or install the plugin that provides it
  algorithm.estimator: estimator "gae" needs values from a critic, but critic.enabled = false  [from tests/cli/recipes/bad.toml]
      fix: set [critic] enabled = true, or choose an estimator that needs no critic (dr_grpo, gdpo, gpg, grpo, grpo_passk, opo, optimal_token_baseline, reinforce_plus_plus, reinforce_plus_plus_baseline, remax, rloo, tir_optimal_token_baseline)
  algorithm.minibatches: 512 samples per step (prompts_per_step 64 x group_size 8) do not split into 3 equal minibatches  [from tests/cli/recipes/bad.toml]
      fix: choose minibatches dividing 512 (1, 2, 4, 8, 16, 32, 64, 128, ...)
""")


def test_validate_broken_toml_gives_file_line_column(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "validate", str(DATA / "broken.toml"), code=2)
    assert result.stderr == snapshot("""\
error: the recipe has 1 problem:
  algorithm.group_size: TOML syntax error: Invalid value (line 5, column 14)  [from tests/cli/recipes/broken.toml:5:14]
      fix: fix the TOML at that line (strings need quotes, one key = value per line, tables as [section])
""")


def test_validate_missing_file_and_bad_override(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "validate", "nope.toml", "-s", "novalue", code=2)
    assert result.stderr.splitlines()[:3] == [
        "error: the recipe has 2 problems:",
        "  nope.toml: recipe file not found",
        f"      fix: check the path (working directory: {Path.cwd()})",
    ]
    assert "override 'novalue' is not KEY=VALUE" in result.stderr


def test_env_and_overrides_apply_in_order(rlctl, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RLCTL_SCHEDULE__TOTAL_STEPS", "7")
    monkeypatch.setenv("RLCTL_RUN__SEED", "3")
    out = json.loads(rlctl("config", "show", SMALL, "-f", "json", "--sources",
                           "-s", "run.seed=5").stdout)
    assert out["recipe"]["schedule"]["total_steps"] == 7
    assert out["recipe"]["run"]["seed"] == 5
    assert out["sources"]["schedule.total_steps"] == "env RLCTL_SCHEDULE__TOTAL_STEPS"
    assert out["sources"]["run.seed"] == "-s run.seed=5"
    assert out["sources"]["run.name"] == SMALL
    assert out["sources"]["rollout.top_p"] == "default"


def test_show_toml(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "show", SMALL)
    assert result.stdout == snapshot("""\
rewards = []

[run]
name = "small"
seed = 0
output_dir = "runs"
device = "auto"

[model]
path = "tiny"
dtype = "bfloat16"
trust_remote_code = false
gradient_checkpointing = false

[model.tiny]
hidden_size = 64
intermediate_size = 128
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
head_dim = 16
max_position_embeddings = 512

[model.lora]
rank = 0
alpha = 16.0
dropout = 0.0
target_modules = "all-linear"
exclude_modules = []
trainable_modules = []

[critic]
enabled = false
lr = 1e-05
cliprange_value = 0.5
warmup_steps = 0

[data]
task = "count_digits"
task_options = {}
prompt_key = "prompt"
answer_key = "reward_model"
max_prompt_tokens = 512
apply_chat_template = true
shuffle = true
val_size = 64

[algorithm]
estimator = "grpo"
prompts_per_step = 8
group_size = 4
minibatches = 2
epochs = 1
gamma = 1.0
lam = 1.0
norm_adv_by_std = true
shuffle_minibatches = true
estimator_options = {}

[algorithm.loss]
policy_loss = "vanilla"
clip_low = 0.2
clip_high = 0.2
clip_ratio_c = 3.0
agg = "token-mean"
entropy_coef = 0.0
options = {}

[algorithm.kl]
in = "loss"
estimator = "k3"
coef = 0.001
controller = "fixed"
target = 6.0
horizon = 10000

[algorithm.optim]
name = "adamw"
lr = 1e-06
weight_decay = 0.0
betas = [0.9, 0.999]
eps = 1e-08
grad_clip = 1.0
scheduler = "constant"
warmup_steps = 0
min_lr_ratio = 0.0

[algorithm.staleness]
policy = "on_policy"
options = {}
partial_rollout = "finish"

[algorithm.correction]
method = "auto"
low = 0.5
high = 2.0
level = "token"

[algorithm.dynamic_sampling]
enabled = false
metric = "score"
max_draws = 10

[algorithm.overlong]
buffer_len = 0
penalty_factor = 1.0
filter = false

[rollout]
max_new_tokens = 256
temperature = 1.0
top_p = 1.0
top_k = 0
agent_loop = "single_turn"
agent_loop_options = {}
tools = []
val_temperature = 0.0
val_group_size = 1
val_correct_score = 1.0

[engines.train]
backend = "fsdp"
ranks = 2
micro_batch_size = 4
log_prob_micro_batch_size = 32
old_log_prob_pass = "auto"
advantage_pass = "auto"
options = {}

[engines.rollout]
backend = "hf"
replicas = 1
agent_workers = 1
weight_sync_options = {}
lora_sync = "adapter"
release_memory = true
options = {}

[engines.reward]
workers = 1

[data_plane]
backend = "ray"
options = {}

[resources]
mode = "ray"
nodes = 1
devices_per_node = 2
accelerator = "auto"
placement = "colocate"

[schedule]
total_steps = 100
eval_every = 0
save_every = 0
keep_last = 3
sample_timeout_s = 600.0
phase_timeout_s = 600.0
start_timeout_s = 600.0
liveness_timeout_s = 25.0

[logging]
sinks = ["console", "jsonl"]
sink_options = {}
rollout_dump_samples = 0
progress = true

# derived (computed from the values above):
#   samples_per_step = 32
#   prompts_per_minibatch = 4
#   minibatch_size = 16
#   data_parallel_size = 2
#   minibatch_size_per_rank = 8
#   micro_batches_per_rank = 2
#   grad_accumulation_steps = 2
#   optimizer_steps_per_train_step = 2
# plan of every step (decided from the values above; docs/trainer.md):
#   roles = actor, ref  (actor: the policy trained; ref: the frozen initial policy the KL is taken to)
#   trained = all weights  (full fine-tuning: 76,160 of 76,160 parameters (100%))
#   reference = ref  (a frozen copy of the initial policy (its own engine))
#   weight sync = full  (every weight trains: the full weights move)
#   old log-probs = pass  (1 epoch(s) x 2 minibatch(es): later ones are off-policy)
#   advantages = update  (no critic: the actor update computes them from its own read of group-whole shards)
#   kl = loss  (a k-estimated KL term in the actor loss, times the KL coefficient)
#   off-policy correction = none  (samples are on-policy, or [algorithm.correction] method = "none")
#   temperature = 1  (the rollout's sampling temperature (0, greedy, is scored at 1))
#   rollout-vs-trainer gap = old log-prob pass  (measured in the first forward over the step's samples with the step's weights)
#   rollout memory while training = keep  (the 'hf' rollout engine cannot release its weights and KV cache (they stay resident))
# placement (colocate; a device is a GPU when the cluster has GPUs, else a CPU core):
#   asks the cluster for node 0: 2 GPU or CPU (devices 0,1)
#   train 0: node 0, devices 0 (share 0.5)
#   train 1: node 0, devices 1
#   rollout 0: node 0, devices 0 (share 0.5)
""")
    assert Recipe.model_validate(tomllib.loads(result.stdout)).run.name == "small"


def test_show_sources_marks_where_values_came_from(rlctl) -> None:  # type: ignore[no-untyped-def]
    lines = rlctl("config", "show", SMALL, "--sources", "-s", "algorithm.epochs=2").stdout
    picked = [line for line in lines.splitlines()
              if line.startswith(("in = ", "epochs = ", "top_p = ", "name = \"small\""))]
    assert picked == snapshot(['name = "small"                          # tests/cli/recipes/small.toml', 'epochs = 2                              # -s algorithm.epochs=2', 'in = "loss"                             # tests/cli/recipes/small.toml', 'top_p = 1.0                             # default'])


def test_show_json_has_recipe_derived_plan_and_placement(rlctl) -> None:  # type: ignore[no-untyped-def]
    out = json.loads(rlctl("config", "show", SMALL, "--format", "json").stdout)
    assert set(out) == {"recipe", "derived", "plan", "placement"}
    assert out["placement"]["nodes"] == [{"node": 0, "devices": [0, 1]}]
    assert [(s["role"], s["devices"], s["share"]) for s in out["placement"]["seats"]] == [
        ("train", [0], 0.5), ("train", [1], 1.0), ("rollout", [0], 0.5)]
    assert {row["what"]: row["choice"] for row in out["plan"]}["old log-probs"] == "pass"
    assert out["recipe"]["algorithm"]["kl"]["in"] == "loss"  # the alias, not apply_in
    assert out["derived"] == snapshot({'samples_per_step': 32, 'prompts_per_minibatch': 4, 'minibatch_size': 16, 'data_parallel_size': 2, 'minibatch_size_per_rank': 8, 'micro_batches_per_rank': 2, 'grad_accumulation_steps': 2, 'optimizer_steps_per_train_step': 2})


def test_show_of_a_bad_recipe_is_exit_2_with_nothing_on_stdout(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "show", str(DATA / "bad.toml"), code=2)
    assert result.stdout == "" and "algorithm.group_sise" in result.stderr


def test_schema_to_stdout_and_to_a_file(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    schema = json.loads(rlctl("config", "schema").stdout)
    assert schema["title"] == "rlctl recipe"
    assert "in" in schema["$defs"]["KLSection"]["properties"]
    target = tmp_path / "rlctl.schema.json"
    result = rlctl("config", "schema", "--output", str(target))
    assert result.stdout == "" and result.stderr == f"wrote {target}\n"
    assert json.loads(target.read_text()) == schema


def test_validate_refuses_partial_rollouts_in_sync_training(rlctl) -> None:  # type: ignore[no-untyped-def]
    result = rlctl("config", "validate", SMALL, "-s", 'algorithm.staleness.partial_rollout="resume"',
                   code=2)
    assert result.stdout == ""
    assert "algorithm.staleness.partial_rollout" in result.stderr
    assert "no request is in flight when the weights change" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_refuses_an_agent_that_is_not_async_with_its_key_path(rlctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recipe = tmp_path / "agent.toml"
    recipe.write_text('[model]\npath = "tiny-chat"\n[data]\ntask = "count_digits"\n'
                      '[rollout]\nagent_loop = "openai_agent"\n'
                      '[rollout.agent_loop_options]\nagent = "os:system"\n')
    result = rlctl("config", "validate", str(recipe), code=2)
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert "rollout.agent_loop_options.agent" in result.stderr
    assert "not async" in result.stderr
