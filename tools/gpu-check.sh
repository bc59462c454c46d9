#!/usr/bin/env bash
# The GPU check, for the GPU machine: GPU info, the GPU tests, and gemm-bench against cuBLAS on
# a small suite. Logs go under $OUT (default: ./gpu-check-out).
#   tools/gpu-check.sh                 uses build/ (built here or carried from another machine)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/gpu-check-out}"
mkdir -p "$out"
export GEMMTUNE_CACHE_DIR="${GEMMTUNE_CACHE_DIR:-$(mktemp -d /tmp/gemmtune-gpu-check-XXXXXX)}"
export GEMMTUNE_DB="${GEMMTUNE_DB:-$GEMMTUNE_CACHE_DIR/tuning.db}"
status=0

echo "== GPU" | tee "$out/gpu-info.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,temperature.gpu --format=csv \
  2>&1 | tee -a "$out/gpu-info.txt"

# The correctness tests run side by side, one process a case: their time is NVRTC compiling on
# the CPU (about 20 minutes one after another on an H200 machine), and processes sharing the GPU
# also check that nothing depends on having it alone (the verifier's sampled points once did).
# The rest (timing, tuning, fault injection) run one at a time.
parallel='Correctness|WgmmaBetaZero|Sanitizer|Mma80Unaligned|GemvAlignment'
echo "== GPU tests (ctest -L gpu): correctness cases in parallel, then the rest one at a time"
if ! ctest --test-dir "$build" -L gpu -R "$parallel" --output-on-failure -j "$(nproc)" >"$out/ctest-gpu.log" 2>&1; then
  status=1
fi
tail -n 12 "$out/ctest-gpu.log"
if ! ctest --test-dir "$build" -L gpu -E "$parallel" --output-on-failure -j 1 >"$out/ctest-gpu-serial.log" 2>&1; then
  status=1
fi
tail -n 12 "$out/ctest-gpu-serial.log"

# sanitize TOOL BINARY FILTER: one test binary under compute-sanitizer, log in $out.
sanitize() {
  local log="$out/sanitizer-$1-$2.log"
  if ! compute-sanitizer --tool "$1" --error-exitcode 1 "$build/bin/$2" --gtest_filter="$3" >"$log" 2>&1; then
    status=1
  fi
  echo "$2 ($1):"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|SKIPPED" "$log" | tail -n 3
}
echo "== compute-sanitizer (memcheck, racecheck) on small shapes of the wgmma, mma_sm80 and gemv kernels, grouped and tf32 ones"
for tool in memcheck racecheck; do
  sanitize "$tool" gpu_wgmma_correctness '*WgmmaSanitizer*'
  sanitize "$tool" gpu_mma_sm80_correctness '*Mma80Sanitizer*'
  sanitize "$tool" gpu_gemv_correctness '*SanitizerSmallShapes*'
  sanitize "$tool" gpu_mma_sm80_grouped '*NothingPast*'  # its group table shares the stages' memory
done
sanitize memcheck gpu_wgmma_grouped '*AGraph*:*Skewed*'
sanitize memcheck gpu_mma_sm80_grouped '*AGraph*:*Skewed*'
# tf32 and 3xTF32 in tn and nn: the launch's derived copies (transposed, low parts) and the kernels
sanitize memcheck gpu_wgmma_tf32 '*OneProduct*'
sanitize memcheck gpu_mma_sm80_tf32 '*OneProduct*'

echo "== gemm-bench, small suite"
if ! "$build/bin/gemm-bench" --suite small --csv "$out/bench-small.csv" 2>"$out/bench-small.err" \
     | tee "$out/bench-small.txt"; then
  status=1
  tail -n 5 "$out/bench-small.err"
fi
echo "gpu-check: $([ $status -eq 0 ] && echo passed || echo FAILED); logs in $out"
exit $status
