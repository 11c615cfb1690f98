#!/usr/bin/env bash
# The kernel measurements of docs/performance.md on an H200, in one command per phase. Run from a
# folder holding src/, tests/, benchmarks/, pyproject.toml and an sglang 0.5.23 wheel (the benchmark needs
# only fused_recurrent.py, kda_packed_decode.cuh and the cutedsl_*.py files from it). Logs and JSON go to $OUT.
#   phase "tests":  the kernel and guard tests on the GPU, runtime_guard.py, decode_vs_sglang.py --tune
#                   (records the fastest tiling per point in $GDR_CHECK_TILING_CACHE)
#   phase "final":  decode_vs_sglang.py with the recorded tilings (and the CuTe DSL when it is unpacked
#                   under $CUTE_SITE), then runtime_guard.py again
#   phase "ncu":    achieved DRAM bandwidth of one launch per named point (Nsight Compute)
set -u
phase=${1:-tests}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export GDR_CHECK_SGLANG_PATH=${GDR_CHECK_SGLANG_PATH:-$(ls "$here"/sglang-*.whl | head -1)}
export GDR_CHECK_TILING_CACHE=${GDR_CHECK_TILING_CACHE:-/root/gdr_tiling.json}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
case "$phase" in
tests)
  command -v ncu && ncu --version | tail -1
  nvcc --version | tail -2
  if ls "$here"/cute.part.00 >/dev/null 2>&1; then mkdir -p /root/cute && cp "$here"/cute.part.00 /root/cute/; fi
  GDR_CHECK_TEST_GPU=1 timeout 140 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernel_gdn.py \
    tests/test_kernel_kda.py tests/test_kernel_vs_sglang.py tests/test_device_guard.py tests/test_kernel_tiling.py \
    >"$OUT/tests.log" 2>&1
  echo "tests rc=$?"; tail -3 "$OUT/tests.log"
  if [ -z "${SKIP_GUARD:-}" ]; then
    timeout 120 python3 benchmarks/runtime_guard.py >"$OUT/runtime_guard_before.log" 2>&1
    echo "runtime_guard rc=$?"; tail -12 "$OUT/runtime_guard_before.log"
  fi
  timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/decode_vs_sglang.py --tune --repeats 2 --no-eager \
    --json "$OUT/tune.json" >"$OUT/tune.log" 2>&1
  echo "tune rc=$?"; grep -c "ours" "$OUT/tune.log"; tail -4 "$OUT/tune.log"
  cp "$GDR_CHECK_TILING_CACHE" "$OUT/tiling.json" 2>/dev/null
  ;;
final)
  if [ -f /root/cute/cute.part.00 ] && [ -f "$here/cute.part.01" ]; then
    mkdir -p /root/cute/site && cat /root/cute/cute.part.00 "$here/cute.part.01" | xz -d -T4 | tar -x -C /root/cute/site \
      && CUTE_SITE=/root/cute/site
    echo "CuTe DSL unpacked: ${CUTE_SITE:-no}"
  fi
  if [ -n "${CUTE_SITE:-}" ] && [ -d "$CUTE_SITE" ]; then
    export PYTHONPATH="$PYTHONPATH:$CUTE_SITE/nvidia_cutlass_dsl/dsl_packages"
    cute=--cute
  fi
  timeout "${BENCH_TIMEOUT:-420}" python3 benchmarks/decode_vs_sglang.py ${cute:-} --cute-budget 100 --repeats 3 \
    --json "$OUT/decode_vs_sglang.json" >"$OUT/final.log" 2>&1
  echo "final rc=$?"; grep -c "ours" "$OUT/final.log"; tail -3 "$OUT/final.log"
  if [ -n "${FINAL_TESTS:-}" ]; then
    GDR_CHECK_TEST_GPU=1 timeout 120 python3 -m pytest -q -rf -p no:cacheprovider tests/test_kernel_gdn.py \
      tests/test_kernel_kda.py tests/test_kernel_vs_sglang.py tests/test_device_guard.py tests/test_kernel_tiling.py \
      >"$OUT/tests.log" 2>&1
    echo "tests rc=$?"; tail -3 "$OUT/tests.log"
  fi
  timeout "${GUARD_TIMEOUT:-120}" python3 benchmarks/runtime_guard.py >"$OUT/runtime_guard.log" 2>&1
  echo "runtime_guard rc=$?"; tail -14 "$OUT/runtime_guard.log"
  cp "$GDR_CHECK_TILING_CACHE" "$OUT/tiling_used.json" 2>/dev/null
  if [ -n "${FINAL_NCU:-}" ] && command -v ncu >/dev/null; then
    timeout "${NCU_TIMEOUT:-80}" python3 benchmarks/ncu_points.py >"$OUT/ncu.log" 2>&1
    echo "ncu rc=$?"; tail -14 "$OUT/ncu.log"
  fi
  ;;
ncu)
  timeout 400 python3 benchmarks/ncu_points.py >"$OUT/ncu.log" 2>&1
  echo "ncu rc=$?"; tail -40 "$OUT/ncu.log"
  ;;
esac
