#!/usr/bin/env bash
# Build the Python environment TRL runs in for benchmarks/vs_trl.py (by hand; CI does not).
#
# Why separate: TRL is no dependency of rlctl. Its env gets the trainer venv's torch and
# transformers (pinned below, as in the README) so that the benchmark compares frameworks,
# not library versions, plus rlctl's base dependencies: the TRL half imports rlctl's tiny
# model, task and reward builders from the source tree (PYTHONPATH), not from an install.
#
# Usage:  bash benchmarks/build_trl_env.sh        (about 3 minutes, 1.5 GB)
#         RLCTL_ENV_DIR=/some/dir bash benchmarks/build_trl_env.sh
# Prints "trl=<python>". Cached like the engine envs under ${RLCTL_ENV_DIR:-~/.cache/rlctl/envs}
# /trl-<version>: a marker file written last (.rlctl-env-complete) makes a rerun a no-op, a
# half-built env (no marker) is removed and rebuilt, a lock file serialises concurrent builds.
set -euo pipefail

ENV_ROOT="${RLCTL_ENV_DIR:-$HOME/.cache/rlctl/envs}"
PYTHON_BIN="${RLCTL_ENV_PYTHON:-python3}"
MARKER=".rlctl-env-complete"

TRL_VERSION="1.16.0"
# TRL 1.16 needs transformers>=4.56.2; these are the trainer venv's versions. reasoning-gym:
# the real workload (vs_trl.py --workload real) builds its prompts with rlctl's task.
TASK_DEPS=("reasoning-gym==0.1.25")
TRL_DEPS=("torch==2.13.0+cpu" "transformers==5.24.0" "datasets" "${TASK_DEPS[@]}")

log() { printf '[build_trl_env] %s\n' "$*" >&2; }

name="trl-${TRL_VERSION}"
dir="$ENV_ROOT/$name"
py="$dir/bin/python"
mkdir -p "$ENV_ROOT"
exec 8>"$ENV_ROOT/$name.lock"
flock 8
if [[ -f "$dir/$MARKER" ]]; then
    # An env built before the real workload existed lacks its task package: add it.
    if ! "$py" -c 'import reasoning_gym' 2>/dev/null; then
        log "$name: adding ${TASK_DEPS[*]}"
        nice -n 10 "$py" -m pip install --quiet "${TASK_DEPS[@]}" "torch==2.13.0+cpu" \
            2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    fi
    log "$name: already built ($dir)"
    echo "trl=$py"
    exit 0
fi
if [[ -d "$dir" ]]; then
    log "$name: incomplete env found (no marker), rebuilding"
    rm -rf "$dir"
fi
log "$name: creating venv in $dir with $("$PYTHON_BIN" --version 2>&1)"
"$PYTHON_BIN" -m venv "$dir"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mapfile -t deps < <("$PYTHON_BIN" -c 'import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$repo/pyproject.toml")
log "$name: pip install trl==$TRL_VERSION ${TRL_DEPS[*]} and rlctl's base dependencies"
# This machine's pip config lists local index directories; pip's warning about each is noise.
nice -n 10 "$py" -m pip install --quiet "trl==$TRL_VERSION" "${TRL_DEPS[@]}" "${deps[@]}" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
log "$name: checking the env"
"$py" - <<'PY'
import sys
from importlib.metadata import version
import torch
from trl import GRPOConfig, GRPOTrainer  # noqa: F401
import reasoning_gym  # noqa: F401
assert torch.__version__ == "2.13.0+cpu", f"expected torch 2.13.0+cpu, got {torch.__version__}"
print(f"trl {version('trl')}, transformers {version('transformers')}, torch {torch.__version__}, "
      f"python {sys.version.split()[0]}")
PY
date -u +%FT%TZ > "$dir/$MARKER"
log "$name: done ($(du -sh "$dir" | cut -f1))"
echo "trl=$py"
