#!/usr/bin/env bash
# Packs what a session with a lent GPU machine needs to run jitfit's GPU tests and benchmarks
# there. That machine has the CUDA toolkit, a C compiler and CMake, but none of jitfit's Debian
# build dependencies (flex, bison, OpenBLAS, LAPACKE, xxhash, inih, cairo) and no network, so
# the binaries are built here and travel with the shared libraries they load (all but the C
# library's own), stripped of debug information, in gpu-bundle.tar.gz (ignored by git: name it
# in the device tool's `carry`), with a kernel cache of the GPU tests' and benchmarks' modules
# compiled for sm_90 here (below; 15-25 minutes). Then, on the device:
# `bash scripts/gpu_session.sh`.
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
# The kernel cache for the device (PRECOMPILE=0 skips it): the GPU tests and benchmarks run here
# on the CUDA emulator with $JITFIT_CUDA_PRECOMPILE_DIR, which also compiles every module they
# build into a CUBIN for sm_90 (runtime/jit_nvrtc.h, jf_cuda_precompile) under the key an
# sm_90 GPU looks up with this NVRTC; the device's NVRTC (13.0 on the H200s) must be the same
# version, or the entries are never hit. On the H200 the tests spent most of their time in
# NVRTC (7.5-14 s per batch module) and never finished within a session's limits. Here it takes
# 15-25 minutes on 2 cores (the emulated tests, and NVRTC on this machine's cores).
if [ "${PRECOMPILE:-1}" = 1 ]; then
  pre=$PWD/gpu-bundle/kernel-cache
  mkdir -p "$pre"
  export JITFIT_CUDA_PRECOMPILE_DIR=$pre
  B=$PWD/build
  run_emu() { # run_emu NAME COMMAND...: one emulated job, its output to build/precompile-NAME.log
    local name=$1
    shift
    if ! env JITFIT_CUDA_EMULATE=1 JITFIT_CACHE_DIR="$B/tests/kernel-cache" "$@" \
      >"$B/precompile-$name.log" 2>&1; then
      echo "gpu_bundle: $name failed on the emulator (build/precompile-$name.log);" \
        "its modules may be missing"
    fi
  }
  (cd "$B/tests" && run_emu test_gpu ./test_gpu) &
  (
    cd "$B/tests" && run_emu crosscheck ./test_crosscheck
    run_emu doctor "$B/jitfit" doctor
    run_emu test_doctor ./test_doctor
    for v in "" JITFIT_GPU_NEQ_BLOCKS=3 JITFIT_GPU_NEQ_BLOCKS=4 JITFIT_GPU_PREFETCH=0; do
      run_emu "bench_gpu$v" env $v "$B/bench/bench_gpu" --sizes 1e4 --reps 1 --cpu-max 0
    done
    run_emu batch "$B/bench/bench_gpu_batch" --fits 200 --cpu-max 0 --spectrum-fits 20
    run_emu batch-noprefetch env JITFIT_GPU_PREFETCH=0 "$B/bench/bench_gpu_batch" --fits 200 \
      --cpu-max 0 --spectrum-fits 0
    run_emu batch-old env JITFIT_GPU_BATCH_THREAD=0 JITFIT_GPU_BATCH_BLOCK=512 \
      "$B/bench/bench_gpu_batch" --fits 200 --cpu-max 0 --spectrum-fits 20
    run_emu batch-3l "$B/bench/bench_gpu_batch" --fits 100 --cpu-max 0 --spectrum-lines 3 \
      --spectrum-fits 10
    run_emu large_p "$B/bench/bench_gpu_large_p" --points 2000 --cpu-max 0 \
      --peaks 2,4,6,8,12,20,24,28,32,36,40
  ) &
  wait
  unset JITFIT_CUDA_PRECOMPILE_DIR
  echo "gpu_bundle: kernel cache for sm_90: $(find "$pre" -type f | wc -l) files," \
    "$(du -sh "$pre" | cut -f1)"
fi
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
