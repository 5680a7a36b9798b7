"""The launch-script reader of ``rlctl config migrate``: just enough bash, nothing run."""

from __future__ import annotations

import pytest

from rlctl.migrate.shell import ScriptError, read_script

SCRIPT = r"""#!/bin/bash
set -x
n_resp=16                      # responses per prompt
max_len=$((1024 * 2))
total=$(( (max_len + 512) / 2 ))
NNODES=${NNODES:-1}
MODEL="${MODEL_ROOT}/Qwen3"
files="['$HOME/a.parquet', '$HOME/b.parquet']"
export VLLM_USE_V1=1
echo "start"; python scripts/convert.py --in $MODEL
python3 -m verl.trainer.main_ppo --config-path=config \
    --config-name='ppo_megatron_trainer'\
    data.train_files="$files" \
    actor_rollout_ref.rollout.n=${n_resp} \
    data.max_prompt_length=$max_len \
    data.max_response_length=$total \
    trainer.nnodes=$NNODES \
    actor_rollout_ref.model.path=$MODEL \
    trainer.logger='["console","wandb"]' \
    trainer.experiment_name=run-$(date +%s) \
    trainer.project_name=\$literal $@
"""


def test_overrides_come_out_expanded(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT)
    call = read_script(path, {"HOME": "/h"})
    assert call.line == 11
    assert call.hydra_flags == {"--config-path": "config", "--config-name": "ppo_megatron_trainer"}
    assert call.overrides == (
        "data.train_files=['/h/a.parquet', '/h/b.parquet']",
        "actor_rollout_ref.rollout.n=16",
        "data.max_prompt_length=2048",
        "data.max_response_length=1280",
        "trainer.nnodes=1",
        "actor_rollout_ref.model.path=${MODEL_ROOT}/Qwen3",
        'trainer.logger=["console","wandb"]',
        "trainer.experiment_name=run-$(date +%s)",
        "trainer.project_name=$literal",
    )
    assert call.unresolved == {"$(date +%s)": ("trainer.experiment_name=run-$(date +%s)",),
                               "MODEL_ROOT": ("actor_rollout_ref.model.path=${MODEL_ROOT}/Qwen3",)}
    assert call.defaults_taken == {"NNODES": "1"}
    assert call.passes_extra_args


def test_var_plays_the_environment_script_assignments_still_win(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT)
    call = read_script(path, {"HOME": "/h", "NNODES": "4", "MODEL_ROOT": "/m", "n_resp": "2"})
    assert "trainer.nnodes=4" in call.overrides and call.defaults_taken == {}
    assert "actor_rollout_ref.rollout.n=16" in call.overrides
    assert "actor_rollout_ref.model.path=/m/Qwen3" in call.overrides


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("echo hi\n", "no `python3 -m verl.trainer.main_ppo` call"),
        ("python3 -m verl.trainer.main_ppo a=1\npython3 -m verl.trainer.main_ppo a=2\n",
         "2 verl.trainer.main_ppo calls"),
        ("python3 -m verl.trainer.main_ppo a='1\n", "bash this reader cannot parse"),
        ("x=$((2 ** ))\npython3 -m verl.trainer.main_ppo a=$x\n", "not arithmetic"),
    ],
)
def test_script_errors(tmp_path, text, message):
    path = tmp_path / "run.sh"
    path.write_text(text)
    with pytest.raises(ScriptError, match=message):
        read_script(path)


def _read(tmp_path, text: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "run.sh"
    path.write_text(text)
    return read_script(path, env or {})


def test_arrays_of_overrides_expand_one_word_per_element(tmp_path):
    call = _read(tmp_path, r"""
DATA=(
    data.train_batch_size=${BSZ:-64}     # a comment inside the array
    "data.train_files=['a.parquet', 'b.parquet']"
)
EXTRA=()
EXTRA+=(trainer.nnodes=2 'trainer.logger=["console"]')
LAUNCH=(python3)
n=${#EXTRA[@]}
"${LAUNCH[@]}" -m verl.trainer.main_ppo "${DATA[@]}" "${EXTRA[@]}" trainer.n_gpus_per_node=$n
""")
    assert call.overrides == ("data.train_batch_size=64",
                              "data.train_files=['a.parquet', 'b.parquet']", "trainer.nnodes=2",
                              'trainer.logger=["console"]', "trainer.n_gpus_per_node=2")
    assert call.defaults_taken == {"BSZ": "64"}


def test_unquoted_expansions_split_into_words(tmp_path):
    call = _read(tmp_path, 'ARGS="a.b=1   c.d=2"\npython3 -m verl.trainer.main_ppo $ARGS "$ARGS"\n')
    assert call.overrides == ("a.b=1", "c.d=2", "a.b=1   c.d=2")


def test_if_and_case_take_the_branch_bash_would(tmp_path):
    text = r"""
DEVICE=${DEVICE:-gpu}
case "${DEVICE}" in
    gpu | cuda) tp=2 ;;
    npu) tp=4 ;;
    *) echo "bad device"; exit 1 ;;
esac
if [ "${NNODES:-1}" -gt 1 ] && [[ $MODE == multi* ]]; then
    nodes=many
elif (( ${NNODES:-1} == 1 )); then
    nodes=one
else
    nodes=two
fi
[ -z "$SKIP" ] && extra=+x.y=1 || extra=+x.y=0
run() { python3 -m verl.trainer.main_ppo "$@" a.tp=$tp a.nodes=$nodes $extra; }
run
"""
    assert _read(tmp_path, text, {"SKIP": ""}).overrides == ("a.tp=2", "a.nodes=one", "+x.y=1")
    unset = _read(tmp_path, text)  # $SKIP unset: -z cannot be decided, never guessed
    assert unset.overrides[2] == "${extra}" and unset.unresolved == {"SKIP": ("${extra}",)}
    call = _read(tmp_path, text, {"DEVICE": "npu", "NNODES": "3", "MODE": "multi-host",
                                  "SKIP": "1"})
    assert call.overrides == ("a.tp=4", "a.nodes=many", "+x.y=0")
    with pytest.raises(ScriptError, match="no `python3 -m verl.trainer.main_ppo` call"):
        _read(tmp_path, text, {"DEVICE": "tpu", "SKIP": ""})  # the script exits before the call


def test_a_branch_on_an_unset_variable_is_reported_not_guessed(tmp_path):
    text = r"""
DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' && echo npu || echo gpu)}
same=1
if [ "$DEVICE" = npu ]; then tp=4; else tp=2; fi
if [ -f /etc/cluster ]; then echo "on the cluster"; fi
python3 -m verl.trainer.main_ppo a.tp=$tp a.same=$same
"""
    call = _read(tmp_path, text)
    assert call.overrides == ("a.tp=${tp}", "a.same=1")  # what both branches agree on is kept
    assert call.unresolved == {"DEVICE": ("a.tp=${tp}",)}
    assert call.branches == {"DEVICE": '[ "$DEVICE" = npu ] (line 4)'}
    assert _read(tmp_path, text, {"DEVICE": "npu"}).overrides == ("a.tp=4", "a.same=1")


def test_a_call_that_only_some_branches_make_is_an_error(tmp_path):
    with pytest.raises(ScriptError, match="call depends on .*pass --var MODE=VALUE"):
        _read(tmp_path, 'if [ "$MODE" = x ]; then python3 -m verl.trainer.main_ppo a=1; fi\n')


@pytest.mark.parametrize(
    ("expr", "value"),
    [("${X:+set}", "set"), ("${Y:+set}", ""), ("${X%.yaml}", "conf"), ("${X#co}", "nf.yaml"),
     ("${X^^}", "CONF.YAML"), ("${X/conf/run}", "run.yaml"), ("$((2 ** 3 + X2 % 3))", "10"),
     ("${Y:-${X}}", "conf.yaml"), ("${A[1]}", "b"), ("${#X}", "9")],
)
def test_parameter_expansions(tmp_path, expr, value):
    call = _read(tmp_path, f"X=conf.yaml\nX2=5\nA=(a b c)\n"
                           f"python3 -m verl.trainer.main_ppo 'k=v' v={expr}\n")
    assert call.overrides[1] == f"v={value}"


def test_a_fifo_or_a_binary_file_is_refused_at_once(tmp_path):
    import os

    fifo = tmp_path / "run.sh"
    os.mkfifo(fifo)  # nobody writes to it: reading would block forever
    with pytest.raises(ScriptError, match="not a regular file"):
        read_script(fifo)
    binary = tmp_path / "bin.sh"
    binary.write_bytes(b"\x7fELF\x02\x01\x00\x00python3 -m verl.trainer.main_ppo")
    with pytest.raises(ScriptError, match="a binary file"):
        read_script(binary)
    latin = tmp_path / "latin.sh"
    latin.write_bytes(b"python3 -m verl.trainer.main_ppo a=caf\xe9\n")
    with pytest.raises(ScriptError, match="not UTF-8"):
        read_script(latin)


def test_a_script_built_to_explode_the_walk_is_refused(tmp_path):
    # each function calls the one before on both ways of a branch on an unset variable:
    # 2**30 walks without a bound (the reader stops at 20,000 statements)
    text = "f0() { v=1; }\n" + "".join(
        f'f{k}() {{ if [ "$X{k}" = a ]; then f{k - 1}; else f{k - 1}; fi; }}\n'
        for k in range(1, 31)) + "f30\n"
    with pytest.raises(ScriptError, match="statements to walk"):
        _read(tmp_path, text + "python3 -m verl.trainer.main_ppo a=1\n")
    deep = "A=" + "${B:-" * 5000 + "x" + "}" * 5000 + "\npython3 -m verl.trainer.main_ppo a=$A\n"
    with pytest.raises(ScriptError, match="nested too deeply|cannot parse"):
        _read(tmp_path, deep)
