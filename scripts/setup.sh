#!/usr/bin/env bash
# Installs the Debian packages jitfit needs to build and test (run as root on Debian 12).
# Skips apt entirely when everything is already installed, so repeated runs cost nothing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config flex bison libxxhash-dev libopenblas-dev liblapacke-dev
      clang libclang-rt-14-dev libinih-dev zlib1g-dev libcairo2-dev libxml2-utils
      libsleef-dev libfast-float-dev)
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
