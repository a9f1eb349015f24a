#!/usr/bin/env bash
# Installs the Debian packages jitfit needs to build and test (run as root on Debian 12).
# Skips apt entirely when everything is already installed, so repeated runs cost nothing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config flex bison libxxhash-dev libopenblas-dev liblapacke-dev
      clang libclang-rt-14-dev libinih-dev zlib1g-dev libcairo2-dev libxml2-utils
      libsleef-dev libfast-float-dev)
# --bench: also what bench/ compares against (numpy and scipy for /usr/bin/python3; GSL and
# Ceres for bench_anchors). The library, the command and the tests never need them.
if [ "${1:-}" = "--bench" ]; then
  pkgs+=(python3-numpy python3-scipy libgsl-dev libceres-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
