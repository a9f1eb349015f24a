#!/usr/bin/env bash
# Runs jitfit's GPU checks and benchmarks on a lent GPU machine, from the repository root, with
# the binaries of gpu-bundle.tar.gz (scripts/gpu_bundle.sh, carried). Results go to $OUT (the
# device tool brings back at most 8 files): env.txt (the GPU, the driver, `jitfit doctor`),
# tests.txt (test_gpu, test_crosscheck, test_doctor), bench.txt (bench_gpu in memory and
# streamed, its anchors NLSQ and scipy, bench_gpu_batch, bench_gpu_large_p), ncu.txt (Nsight
# Compute on one fit's first kernels, where the machine has ncu). Every step has its
# own time limit and the script goes on after a failure, so one run returns what it can.
# A session has 15 minutes of device time in all, the machine's start (1-2 minutes) included,
# and one call may run 600 s: so everything runs in ONE call, the steps in four parts in the
# order PARTS names them (by default the benchmarks first: the first session, on an H200,
# showed the GPU path correct, and its tests took 470 s of the 540; the single fits' anchors at
# sizes other than 1e6 and 1e7 and the kernel profile after the batches), and a step that
# would start after DEADLINE seconds (default 540, counted from the script's start, the
# unpacking and the library search included) is skipped with a line saying so, and a step that
# outlives its limit is sent TERM, then KILL 10 s later. Give the call timeout_s 600:
#   bash scripts/gpu_session.sh                     (PARTS="single batch extra tests")
# A second call (PARTS=batch, or one part again after a fix) fits only while the machine is
# warm and enough of the 15 minutes is left.
# BANDWIDTH and FP64_PEAK (bytes/s, flop/s) set the roofline (default: H100 SXM nominal, and
# BANDWIDTH=4.8e12 where nvidia-smi names an H200).
# QUICK=1 runs small sizes (a check of this script; with JITFIT_CUDA_EMULATE=1 it runs
# anywhere). STREAM_2E9=1 adds the issue's 2e9-point streamed-vs-in-memory run (32 GB of host
# memory for the data, minutes to generate).
set -u
t0=$SECONDS # the deadline counts from here: the unpacking and the library search take time too
root=$PWD
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) # absolute: the tests' steps run in build/tests
tar xzf gpu-bundle.tar.gz || { echo "gpu_session: gpu-bundle.tar.gz missing (scripts/gpu_bundle.sh)"; exit 1; }
src=$(cat gpu-bundle/SRC_DIR)
# the tests look for their data and the CLI under the path they were built at
if [ "$src" != "$root" ] && [ -e "$src/build/CMakeCache.txt" ] && [ "${GPU_SESSION_OVERWRITE:-0}" != 1 ]; then
  echo "gpu_session: $src/build is a build tree here; the session would replace its binaries" \
    "with wrappers (set GPU_SESSION_OVERWRITE=1 to allow, e.g. for a dry run in a scratch clone)"
  exit 1
fi
if [ "$src" != "$root" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"
fi
mkdir -p "$src/build/tests" "$src/build/bench" "$src/build/real"
# NVRTC, cuBLAS and cuSOLVER are the device's (the bundle cannot carry them: cuBLAS alone is
# hundreds of MB), loaded with dlopen: the toolkit's lib directory, else the pip wheels'.
cudalib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  ls "$d"/libnvrtc.so* >/dev/null 2>&1 && cudalib=${cudalib:+$cudalib:}$d
done
for l in libnvrtc.so libcublas.so libcusolver.so; do
  d=$(find /opt /usr/local /usr/lib -name "$l*" -path '*nvidia*' 2>/dev/null | head -n 1)
  [ -n "$d" ] && cudalib=${cudalib:+$cudalib:}$(dirname "$d")
done
{
  echo "CUDA libraries: ${cudalib:-none found}"
  ldconfig -p | grep -E 'libnvrtc|libcublas|libcusolver' || echo "(none in ldconfig)"
} >>"$OUT/env.txt"
# The bundle's Debian libraries are for jitfit's binaries only, not for the device's Python
# (the anchors): each binary is a wrapper that sets the path and runs the real one.
jlp=$root/gpu-bundle/lib${cudalib:+:$cudalib}
wrap() { # wrap NAME DEST: DEST runs build/real/NAME with the bundle's libraries
  cp "gpu-bundle/bin/$1" "$src/build/real/$1"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
    "$jlp" "$src/build/real/$1" >"$2"
  chmod +x "$2"
}
wrap jitfit "$src/build/jitfit"
for t in test_gpu test_crosscheck test_doctor; do wrap "$t" "$src/build/tests/$t"; done
for t in bench_gpu bench_gpu_batch bench_gpu_large_p bench_gpu_copy bench_host_passes; do wrap "$t" "$src/build/bench/$t"; done
export JITFIT_CACHE_DIR=${JITFIT_CACHE_DIR:-/tmp/jitfit-gpu-session-cache}
# the kernel cache the bundle precompiled for sm_90 on the emulator (gpu_bundle.sh): the
# modules found there are not compiled here (the tests' NVRTC time)
if [ -d gpu-bundle/kernel-cache ] && [ ! -e "$JITFIT_CACHE_DIR" ]; then
  cp -r gpu-bundle/kernel-cache "$JITFIT_CACHE_DIR"
  echo "kernel cache from the bundle: $(find "$JITFIT_CACHE_DIR" -type f | wc -l) files" \
    >>"$OUT/env.txt"
fi
B=$src/build
deadline=${DEADLINE:-540}
parts=" ${PARTS:-single batch extra tests} "
step() { # step FILE LIMIT_S COMMAND...: appends the command's output and status to $OUT/FILE
  local file=$1 limit=$2 left=$((deadline - (SECONDS - t0)))
  shift 2
  if [ "$left" -lt 20 ]; then
    echo "=== skipped (DEADLINE ${deadline} s reached): $*" | tee -a "$OUT/$file"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$((left - 10)) # room for timeout's KILL
  # shellcheck disable=SC2094 # the file is read only after the step's writer has ended
  {
    echo "=== $* ($(date -u +%H:%M:%S), limit ${limit} s)"
    timeout -k 10 "$limit" "$@" 2>&1
    local rc=$?
    # a step killed mid-line must not glue its marker to that line
    [ -n "$(tail -c 1 "$OUT/$file")" ] && echo
    case $rc in 124 | 137) echo "=== exit $rc after $((SECONDS - t0)) s (killed at its limit)" ;;
    *) echo "=== exit $rc after $((SECONDS - t0)) s" ;; esac
  } >>"$OUT/$file"
  tail -n 4 "$OUT/$file"
}
if [ "${QUICK:-0}" = 1 ]; then
  sizes=1e4,4e4; big=4e4; direct_sizes=4e4; ncu_size=4e4; anchor_first=4e4; anchor_rest=1e4
  stream_mem=4e5; fits=1e3; spec="--spectrum-fits 100"; reps=1
  fits_cmp=1e3; spec_cmp=100; copy_bytes=1.6e6,1.6e7
  spec3_fits=50; scipy_max=4e4
  lp_points=3000; lp_peaks=2,6; knob_sizes=4e4
else
  sizes=1e5,1e6,1e7,1e8; big=1e8; direct_sizes=1e6,1e7,1e8; ncu_size=1e7;
  anchor_first=1e6,1e7; anchor_rest=1e5,1e8; stream_mem=4e8; fits=1e4,1e5,1e6,1e7; spec=""; reps=5
  fits_cmp=1e5; spec_cmp=1e4; copy_bytes=1.6e7,1.6e8,1.6e9
  lp_points=1e6; lp_peaks=2,4,6,8,12,20,24,28,32,36,40; scipy_max=1e7; knob_sizes=1e6,1e7,1e8
fi
echo "commit $(cat gpu-bundle/COMMIT 2>/dev/null), parts:$parts" >>"$OUT/env.txt"
# what the machine is, whatever the parts (14 s on the H200)
step env.txt 60 nvidia-smi
step env.txt 120 "$B/jitfit" doctor
if [ -z "${BANDWIDTH:-}" ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H200; then
  BANDWIDTH=4.8e12
fi
site=/tmp/jitfit-gpu-session-site
anchors() { # anchors LIMIT SIZES
  # JAX takes 75 % of the GPU's memory when it starts unless told not to: jitfit's
  # bench_gpu, which the anchors run beside it, must see the memory free
  step bench.txt "$1" env PYTHONPATH="$site" PYTHONUNBUFFERED=1 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false python3 bench/bench_gpu_anchors.py \
    --bench-gpu "$B/bench/bench_gpu" --sizes "$2" --scipy-max "$scipy_max"
}
part_tests() {
  (cd "$B/tests" && step tests.txt 300 ./test_gpu)
  (cd "$B/tests" && step tests.txt 200 ./test_crosscheck)
  (cd "$B/tests" && step tests.txt 60 ./test_doctor)
}
part_single() {
  # what changed since the GPU last ran, checked on it first (seconds): the staged upload, a
  # pass whose block reduction adds 1024 blocks' rows (a block per sum), against the CPU, and
  # the statistics' passes behind the loop (weights, a robust loss) in each loop form
  (cd "$B/tests" && step tests.txt 60 ./test_gpu upload)
  (cd "$B/tests" && step tests.txt 60 ./test_gpu many-blocks)
  (cd "$B/tests" && step tests.txt 60 ./test_gpu tails)
  # the upload's candidates (a few seconds): pageable, page-locked, staged (what a fit does
  # from 4 MiB on)
  step bench.txt 60 "$B/bench/bench_gpu_copy" --bytes "$copy_bytes"
  # the host's own scans of a fit's data (checks, weights, R²) on that machine's cores (seconds)
  step bench.txt 30 "$B/bench/bench_host_passes" --sizes 1e6,1e7 --reps 5
  step bench.txt 240 "$B/bench/bench_gpu" --sizes "$sizes" --reps "$reps" --bandwidth "${BANDWIDTH:-3.35e12}" --fp64-peak "${FP64_PEAK:-3.4e13}"
  # the anchors on the same data: NLSQ (its wheel from the bundle; JAX is the device's) and
  # scipy, first at the sizes of the issue's target (never measured: the first session ran
  # out of time before them), the other sizes after the streamed run
  ls gpu-bundle/whl/*.whl >/dev/null 2>&1 &&
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" gpu-bundle/whl/*.whl >/dev/null 2>&1
  anchors 150 "$anchor_first"
  # the same fits with the driver's pageable copy instead of the staged upload (the note's
  # host-clock split under each row says what the upload took either way)
  step bench.txt 60 env JITFIT_GPU_UPLOAD=direct "$B/bench/bench_gpu" --sizes "$direct_sizes" \
    --reps 3 --cpu-max 0
  step bench.txt 120 "$B/bench/bench_gpu" --sizes "$big" --reps "$reps" --cpu-max 0 --max-gpu-mem "$stream_mem"
  # ... and streamed the way the second session ran it: from a page-locked copy made at the
  # start (1.2 s of its 1.6 s there) instead of staged with each pass (the default since)
  step bench.txt 60 env JITFIT_GPU_STREAM=pinned "$B/bench/bench_gpu" --sizes "$big" --reps 3 \
    --cpu-max 0 --max-gpu-mem "$stream_mem"
  # the knobs the second session's numbers suggested (each a few seconds): jf_normal_eq with
  # fewer registers for more blocks per SM (25 % occupancy there, register-bound), the
  # staged upload with all the host's threads or smaller chunks, and normal_eq without its
  # loads one point ahead (added after that session: whether they pay for 6 more registers)
  for v in JITFIT_GPU_NEQ_BLOCKS=3 JITFIT_GPU_NEQ_BLOCKS=4 JITFIT_GPU_STAGE_THREADS=16 \
    JITFIT_GPU_STAGE=8388608 JITFIT_GPU_PREFETCH=0; do
    step bench.txt 40 env "$v" "$B/bench/bench_gpu" --sizes "$knob_sizes" --reps "$reps" --cpu-max 0
  done
}
part_extra() {
  # the anchors at the other sizes, and the kernels' profile: after the batches, which the
  # first session never reached
  anchors 150 "$anchor_rest"
  # inside the loop: Nsight Compute on the first kernels of one fit (the device's ncu reads the
  # counters on Firecracker machines, not on gVisor ones; unrolled graphs, which it follows
  # for certain, instead of the WHILE node)
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
  if [ -n "$ncu" ]; then
    step ncu.txt 120 env JITFIT_GPU_NO_WHILE=1 "$ncu" --clock-control none \
      --kernel-name regex:'jf_(normal_eq|reduce_blocks|lm_step)' --launch-count 9 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      "$B/bench/bench_gpu" --sizes "$ncu_size" --reps 1 --cpu-max 0
    # the thread-per-fit batch kernel (5x5 Gaussians: a small warm-up batch, then the timed one,
    # fp64 then fp32): where its time goes (local memory, stalls), never profiled
    step ncu.txt 120 "$ncu" --clock-control none --kernel-name regex:'jf_batch_lm' \
      --launch-count 4 --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section MemoryWorkloadAnalysis \
      "$B/bench/bench_gpu_batch" --fits "$fits_cmp" --cpu-max 0 --spectrum-fits 0
  else
    echo "=== no ncu on this machine: the kernel profile is skipped" >>"$OUT/ncu.txt"
  fi
}
part_batch() {
  # each batch's host-clock split (checks, module, memory, packing and launches, waiting for
  # the GPU, rows) on stderr, a line per batch, under its table's rows
  export JITFIT_GPU_BATCH_TIMES=1
  # the thread-per-fit kernel against the CPU first: it has run on the emulator only
  (cd "$B/tests" && step tests.txt 60 ./test_gpu batch-thread)
  # the kernels side by side first, at sizes each runs in seconds: the defaults (a thread per
  # 5x5 fit, a warp per 1000-point spectrum), then the first session's (a warp per 5x5 fit, a
  # block per spectrum: 2.6e5 and 2.8e3 fits/s on the H200)
  step bench.txt 120 "$B/bench/bench_gpu_batch" --fits "$fits_cmp" --cpu-max "$fits_cmp" \
    --spectrum-fits "$spec_cmp"
  step bench.txt 60 env JITFIT_GPU_BATCH_THREAD=0 JITFIT_GPU_BATCH_BLOCK=512 \
    "$B/bench/bench_gpu_batch" --fits "$fits_cmp" --cpu-max 0 --spectrum-fits "$spec_cmp"
  # the 5x5 fits without the next point's loads ahead (jf_fit_sums' prefetch: unmeasured)
  step bench.txt 60 env JITFIT_GPU_PREFETCH=0 "$B/bench/bench_gpu_batch" --fits "$fits_cmp" \
    --cpu-max 0 --spectrum-fits 0
  # the thread kernel with fewer fits at once (a grid of 1, 2 blocks per SM, 128 threads each):
  # whether its local-memory workspaces, ≈180 MB at full occupancy, thrash the 50 MB L2
  for v in 1 2; do
    step bench.txt 60 env JITFIT_GPU_BATCH_BLOCKS_PER_SM=$v "$B/bench/bench_gpu_batch" \
      --fits "$fits_cmp" --cpu-max 0 --spectrum-fits 0
  done
  # shellcheck disable=SC2086
  step bench.txt 240 "$B/bench/bench_gpu_batch" --fits "$fits" --cpu-max 1e6 $spec
  # the largest batch again in one launch (no chunks: what the two-stream pipeline gains)
  step bench.txt 60 env JITFIT_GPU_BATCH_CHUNK=1e15 "$B/bench/bench_gpu_batch" --fits "${fits##*,}" \
    --cpu-max 0 --spectrum-fits 0
  # ... and in chunks with pageable staging (what page-locking it costs and gains)
  step bench.txt 60 env JITFIT_GPU_BATCH_PINNED=0 "$B/bench/bench_gpu_batch" --fits "${fits##*,}" \
    --cpu-max 0 --spectrum-fits 0
  # three lines on a baseline (11 parameters): the block-per-fit kernel with tiled sums
  step bench.txt 90 "$B/bench/bench_gpu_batch" --fits 1e3 --cpu-max 1e6 --spectrum-lines 3 \
    --spectrum-fits "${spec3_fits:-1e4}"
  step bench.txt 120 "$B/bench/bench_gpu_large_p" --points "$lp_points" --peaks "$lp_peaks"
  if [ "${STREAM_2E9:-0}" = 1 ]; then
    step bench.txt 300 "$B/bench/bench_gpu" --sizes 2e9 --reps 1 --cpu-max 0
    step bench.txt 300 "$B/bench/bench_gpu" --sizes 2e9 --reps 1 --cpu-max 0 --max-gpu-mem 8e9
  fi
}
# the parts in the order PARTS names them (default: the benchmarks first, which the first
# session's tests crowded out: they took 470 s of its 540)
for p in $parts; do
  case $p in
  tests | single | batch | extra) "part_$p" ;;
  *) echo "gpu_session: unknown part '$p' (tests, single, batch, extra)" | tee -a "$OUT/env.txt" ;;
  esac
done
echo "gpu_session: results in $OUT"
