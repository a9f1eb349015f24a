#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: the normal build (warnings are errors), then
# the AddressSanitizer + UndefinedBehaviorSanitizer build's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
bash scripts/build.sh build
(cd build && ctest --output-on-failure -j"$jobs")
bash scripts/build.sh build-asan -DJITFIT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs" -LE slow)
