#!/usr/bin/env bash
# Configures and builds jitfit into the directory given as $1 (default build/); extra
# arguments are passed to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJITFIT_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
