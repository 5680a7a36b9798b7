#!/usr/bin/env bash
# Issue 6 GPU check: a few GRPO steps on one GPU with real engines, printing step times and reward.
#
#   1. vLLM rollout + FSDP2 (NCCL) training, then
#   2. vLLM rollout + Megatron-core training,
# each on recipes/tiny_grpo.toml + scripts/gpu_check.toml (qwen3_grpo's algorithm scaled down
# to one GPU and a small Qwen3 built offline: the GPU machine cannot download), then
#   3. colocated memory (CUDA only): the rollout server's sleep / wake and the weight sync
#      across it (scripts/gpu_colocated_memory.py: device memory freed, generation after the
#      sync; vLLM, and SGLang when RLCTL_SGLANG_PYTHON names its env), and the fsdp run again
#      with engines.rollout.release_memory=false: step time with and without the release,
#   4. where 2+ GPUs are visible: split and colocate placement on two GPUs (placement.json:
#      every worker sees exactly the GPU Ray gave it; split keeps rollout off training's GPU).
#
# Usage:   scripts/gpu_check.sh                    (on a machine with one CUDA GPU, ~10 min)
#          STEPS=4 scripts/gpu_check.sh            (fewer steps)
#          RLCTL_VLLM_PYTHON=/env/bin/python ...   (an interpreter with vllm; default: the env
#                                                   scripts/build_engine_envs.sh vllm builds)
#          GPU_CHECK_DEVICE=cpu scripts/gpu_check.sh   (dry run of this script on a CPU machine:
#                                                   smaller model, 2 steps, Megatron through the
#                                                   test-only CUDA shim in tests/engines/train/megatron)
# Needs: rlctl installed with the train and megatron extras; vLLM in its own env.
# Output: per-step lines, then a summary per engine; run dirs under $GPU_CHECK_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE="${GPU_CHECK_DEVICE:-cuda}"
STEPS="${STEPS:-6}"
RUN_ROOT="${GPU_CHECK_DIR:-${OUT:-/tmp}/rlctl-gpu-check}"
BACKENDS="${GPU_CHECK_BACKENDS:-fsdp megatron}"
STEP_TIMEOUT_S="${GPU_CHECK_TIMEOUT_S:-300}"
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 PYTHONUNBUFFERED=1

overrides=(-s "schedule.total_steps=$STEPS")
if [[ "$DEVICE" == "cuda" ]]; then
    python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "no CUDA GPU visible to torch")'
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
    STEPS="${STEPS_CPU:-2}"
    overrides=(
        -s "schedule.total_steps=$STEPS" -s run.device=cpu -s model.dtype=float32
        -s model.tiny.hidden_size=128 -s model.tiny.intermediate_size=256
        -s model.tiny.num_hidden_layers=2 -s model.tiny.num_attention_heads=4
        -s model.tiny.num_key_value_heads=2 -s model.tiny.head_dim=32
        -s algorithm.prompts_per_step=16 -s resources.num_cpus=2
    )
    # Megatron-core's forward hard-codes CUDA calls; on CPU the test-only shim patches them.
    export PYTHONPATH="$PWD/tests/engines/train/megatron/shim${PYTHONPATH:+:$PYTHONPATH}"
fi

VLLM_PY="${RLCTL_VLLM_PYTHON:-}"
if [[ -z "$VLLM_PY" ]]; then
    VLLM_PY="$(scripts/build_engine_envs.sh vllm | sed -n 's/^vllm=//p')"
fi
echo "gpu_check: device=$DEVICE steps=$STEPS vllm python=$VLLM_PY runs in $RUN_ROOT"

status=0
for backend in $BACKENDS; do
    name="gpu-check-$backend"
    started=$(date +%s)
    echo "=== $backend: rlctl train recipes/tiny_grpo.toml scripts/gpu_check.toml -s engines.train.backend=$backend"
    if ! timeout "$STEP_TIMEOUT_S" rlctl train recipes/tiny_grpo.toml scripts/gpu_check.toml --quiet \
        "${overrides[@]}" -s "engines.train.backend=$backend" \
        -s "engines.rollout.options.python=$VLLM_PY" \
        -s "run.output_dir=$RUN_ROOT" -s "run.name=$name"; then
        echo "=== $backend: FAILED (exit $?)"
        status=1
        continue
    fi
    python - "$RUN_ROOT/$name/metrics.jsonl" "$backend" "$(( $(date +%s) - started ))" <<'PY'
import json, sys

path, backend, wall = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(line) for line in open(path) if line.strip()]
columns = {"step_s": "timing_s/step", "gen_s": "timing_s/gen", "old_log_prob_s": "timing_s/old_log_prob",
           "update_actor_s": "timing_s/update_actor", "weight_sync_s": "timing_s/update_weights",
           "reward": "critic/score/mean"}
keys = tuple(columns.values())
print(f"{'step':>4} " + " ".join(f"{label:>15}" for label in columns))
for r in rows:
    print(f"{r['step']:>4} " + " ".join(f"{r.get(k, float('nan')):>15.4f}" for k in keys))
later = rows[1:] or rows  # step 1 includes compilation and warm-up
mean_step = sum(r["timing_s/step"] for r in later) / len(later)
print(f"=== {backend}: {len(rows)} steps, wall {wall} s, mean step (after the first) {mean_step:.2f} s, "
      f"reward first {rows[0]['critic/score/mean']:.3f} last {rows[-1]['critic/score/mean']:.3f}")
PY
done

# 3. Colocated memory: vLLM sleep mode / SGLang's memory saver run on CUDA only.
if [[ "$DEVICE" == "cuda" && "${GPU_CHECK_SLEEP:-1}" == "1" ]]; then
    echo "=== colocated memory: sleep / wake and the weight sync across it"
    timeout "$STEP_TIMEOUT_S" python scripts/gpu_colocated_memory.py vllm "$VLLM_PY" || status=1
    if [[ -n "${RLCTL_SGLANG_PYTHON:-}" ]]; then
        timeout "$STEP_TIMEOUT_S" python scripts/gpu_colocated_memory.py sglang \
            "$RLCTL_SGLANG_PYTHON" || status=1
    fi
    name="gpu-check-fsdp-resident"
    echo "=== fsdp with engines.rollout.release_memory=false (compare with gpu-check-fsdp)"
    if timeout "$STEP_TIMEOUT_S" rlctl train recipes/tiny_grpo.toml scripts/gpu_check.toml --quiet \
        "${overrides[@]}" -s engines.train.backend=fsdp -s engines.rollout.release_memory=false \
        -s "engines.rollout.options.python=$VLLM_PY" \
        -s "run.output_dir=$RUN_ROOT" -s "run.name=$name"; then
        python - "$RUN_ROOT" <<'PY'
import json, sys

def rows(name):
    path = f"{sys.argv[1]}/{name}/metrics.jsonl"
    try:
        return [json.loads(line) for line in open(path) if line.strip()][1:]  # after warm-up
    except FileNotFoundError:
        return []

for name in ("gpu-check-fsdp", "gpu-check-fsdp-resident"):
    got = rows(name)
    if not got:
        print(f"=== {name}: no metrics")
        continue
    mean = lambda k: sum(r.get(k, 0.0) for r in got) / len(got)
    print(f"=== {name}: mean step {mean('timing_s/step'):.2f} s, release "
          f"{mean('timing_s/release_memory'):.3f} s, weight sync {mean('timing_s/update_weights'):.2f} s, "
          f"released {mean('rollout/memory_released'):.2f}")
PY
    else
        echo "=== fsdp resident: FAILED (exit $?)"
        status=1
    fi
else
    echo "=== colocated memory: skipped (device=$DEVICE: sleep mode is CUDA-only)"
fi
# 4. Placement on 2+ GPUs: split gives rollout a GPU of its own; colocate shares them.
gpus=0
if [[ "$DEVICE" == "cuda" ]]; then
    gpus=$(python -c 'import torch; print(torch.cuda.device_count())')
fi
if (( gpus >= 2 )); then
    for placement in split colocate; do
        name="gpu-check-place-$placement"
        ranks=$([[ "$placement" == "split" ]] && echo 1 || echo 2)
        echo "=== placement $placement on 2 GPUs: $ranks training rank(s), one vLLM replica"
        if ! timeout "$STEP_TIMEOUT_S" rlctl train recipes/tiny_grpo.toml scripts/gpu_check.toml \
            --quiet "${overrides[@]}" -s engines.train.backend=fsdp -s resources.accelerator=gpu \
            -s resources.devices_per_node=2 -s "resources.placement=$placement" \
            -s "engines.train.ranks=$ranks" -s "engines.rollout.options.python=$VLLM_PY" \
            -s "run.output_dir=$RUN_ROOT" -s "run.name=$name"; then
            echo "=== placement $placement: FAILED (exit $?)"
            status=1
            continue
        fi
        python - "$RUN_ROOT/$name" "$placement" <<'PY' || status=1
import json, sys

run, placement = sys.argv[1], sys.argv[2]
rows = json.load(open(f"{run}/placement.json"))
for r in rows:
    seen = r["reported"]
    print(f"  {r['role']} {r['rank']}: GPU {','.join(r['devices'])} share {r['share']:g}, "
          f"sees CUDA_VISIBLE_DEVICES={seen['cuda_visible_devices']}")
    assert seen["cuda_visible_devices"] == ",".join(r["devices"]), r  # what Ray gave it
train = {d for r in rows if r["role"] == "train" for d in r["devices"]}
rollout = {d for r in rows if r["role"] == "rollout" for d in r["devices"]}
if placement == "split":
    assert not train & rollout, (train, rollout)
else:
    assert rollout <= train, (train, rollout)
steps = [json.loads(x) for x in open(f"{run}/metrics.jsonl") if x.strip()][1:]
if steps:
    mean = sum(r["timing_s/step"] for r in steps) / len(steps)
    print(f"=== placement {placement}: ok, mean step (after the first) {mean:.2f} s")
PY
    done
else
    echo "=== placement on 2 GPUs: skipped ($gpus GPU(s) visible)"
fi
exit $status
