#!/usr/bin/env bash
# Packs what a session with a lent GPU machine needs to run jitfit's GPU tests and benchmarks
# there. That machine has the CUDA toolkit, a C compiler and CMake, but none of jitfit's Debian
# build dependencies (flex, bison, OpenBLAS, LAPACKE, xxhash, inih, cairo) and no network, so
# the binaries are built here and travel with the shared libraries they load (all but the C
# library's own), stripped of debug information, in gpu-bundle.tar.gz (ignored by git: name it
# in the device tool's `carry`). Then, on the device: `bash scripts/gpu_session.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
bins=(build/jitfit build/tests/test_gpu build/tests/test_crosscheck build/tests/test_doctor
      build/bench/bench_gpu build/bench/bench_gpu_batch build/bench/bench_gpu_large_p
      build/bench/bench_gpu_copy build/bench/bench_host_passes)
rm -rf gpu-bundle gpu-bundle.tar.gz
mkdir -p gpu-bundle/bin gpu-bundle/lib
for b in "${bins[@]}"; do
  strip --strip-debug -o "gpu-bundle/bin/$(basename "$b")" "$b"
done
# the shared libraries, by soname, except the C library's, which the device has in a newer version;
# cairo too, which jitfit opens with dlopen for --plot (cli/cairo_api.h), so ldd does not list it
cairo=$(pkg-config --variable=libdir cairo)/libcairo.so.2
[ -e "$cairo" ] || { echo "gpu_bundle: $cairo not found"; exit 1; }
cp -L "$cairo" gpu-bundle/lib/libcairo.so.2
ldd "${bins[@]}" "$cairo" | awk '/=> \//{print $1, $3}' | sort -u |
  grep -vE '^(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so|ld-linux' |
  while read -r soname path; do
    cp -L "$path" "gpu-bundle/lib/$soname"
  done
# NLSQ for bench/bench_gpu_anchors.py: the device's Python (3.12) has JAX with CUDA and every
# package NLSQ imports, but not NLSQ; its pure-Python wheel travels (0.7.6 ran with JAX 0.11.2,
# the device's). Without network here the anchors step says "NLSQ unavailable" there.
mkdir -p gpu-bundle/whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux2014_x86_64 -d gpu-bundle/whl nlsq==0.7.6 ||
  echo "gpu_bundle: NLSQ's wheel could not be fetched; the anchors will run without NLSQ"
# the paths compiled into the tests (data, the CLI), which gpu_session.sh recreates there
pwd > gpu-bundle/SRC_DIR
# (+dirty: built from uncommitted changes to tracked files, which the hash alone would hide)
{ git rev-parse HEAD && { git diff --quiet HEAD -- || echo +dirty; }; } 2>/dev/null |
  paste -sd '' - > gpu-bundle/COMMIT || true
tar czf gpu-bundle.tar.gz gpu-bundle
rm -rf gpu-bundle
echo "gpu-bundle.tar.gz: $(du -h gpu-bundle.tar.gz | cut -f1) ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
