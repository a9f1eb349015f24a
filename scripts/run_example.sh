#!/usr/bin/env bash
# The main job on the bundled example: install, build, then fit the damped sine
# a*exp(-b*x)*sin(c*x+d)+e to examples/damped_sine.csv and print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
./build/jitfit fit examples/damped_sine.jf examples/damped_sine.csv
