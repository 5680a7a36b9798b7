#!/usr/bin/env bash
# Kept for old instructions: the build script ships inside the package now (`rlctl engines
# install ENGINE` runs it with a progress display). Same arguments, same output.
exec bash "$(dirname "$0")/../rlctl/engines/rollout/server/build_engine_envs.sh" "$@"
