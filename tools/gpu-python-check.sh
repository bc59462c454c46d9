#!/usr/bin/env bash
# The Python package on the GPU machine, with the build carried from elsewhere (build/lib,
# build/bin) and that machine's python3 (torch). Logs and results go under $OUT (default:
# ./gpu-python-out); a summary table comes last.
#   tools/gpu-python-check.sh          both parts (about 6-9 minutes on an H100)
#   tools/gpu-python-check.sh tests    pytest: python/tests, CPU and GPU tests
#   tools/gpu-python-check.sh demo     record, then tune (examples/python/record_then_tune.py),
#                                      the benchmark of docs/PERF.md, 'A planned Python call costs less
#                                      host time than F.linear' (with its --breakdown), gemm-db report
# TUNE_BUDGET (default 16) caps gemm-tune's candidates per problem; PYTHON picks the Python.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/gpu-python-out}"
python="${PYTHON:-python3}"
part="${1:-all}"
mkdir -p "$out"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export GEMMTUNE_LIBRARY="$build/lib/libgemmtune.so"
export GEMMTUNE_BIN_DIR="$build/bin"
# A database of its own, empty at the start: nothing is tuned until the demo tunes it.
work="$(mktemp -d /tmp/gemmtune-python-XXXXXX)"
export GEMMTUNE_CACHE_DIR="$work/cache" GEMMTUNE_DB="$work/tuning.db"
unset GEMMTUNE_RECORD
status=0
summary=()
note() { summary+=("$(printf '  %-44s %s' "$1" "$2")"); }
fail() { status=1; note "$1" "FAILED: $2"; }

echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
"$python" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda)"

run_tests() {
  echo "== pytest python/tests (log: $out/pytest.log)"
  "$python" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" >"$out/pytest.log" 2>&1
  local rc=$? last
  last="$(tail -n 1 "$out/pytest.log")"
  grep -E "^(FAILED|ERROR|SKIPPED)" "$out/pytest.log" | head -n 20
  echo "$last"
  if grep -qE "SKIPPED .*test_gpu_torch.py:[0-9]+: (could not import|no CUDA)" "$out/pytest.log"; then
    fail "pytest (CPU and GPU tests)" "the GPU tests were skipped: no torch or no CUDA ($last)"
  elif [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)" = 9.0 ] \
      && grep -qE "SKIPPED .*(test_gpu_scaled.py|conftest.py):[0-9]+: (could not import|torch .* has no float8)" \
        "$out/pytest.log"; then
    fail "pytest (CPU and GPU tests)" "the float8 GPU tests were skipped on Hopper ($last)"
  elif [ $rc -eq 0 ]; then
    note "pytest (CPU and GPU tests)" "passed: $last"
    # Cases torch._scaled_mm itself refuses here are compared with the dequantized product only.
    if grep -qE "SKIPPED .*torch._scaled_mm refuses" "$out/pytest.log"; then
      note "  float8: torch._scaled_mm refused some" "cases (SKIPPED lines of pytest.log)"
    fi
  else
    fail "pytest (CPU and GPU tests)" "$last"
  fi
}

problem_lines() { grep -v '^#' "$1" 2>/dev/null | grep -c .; }

run_demo() {
  local shapes="$out/recorded-shapes.txt" example="$root/examples/python/record_then_tune.py"
  rm -f "$shapes"
  echo "== record: the block on an empty database, GEMMTUNE_RECORD=$shapes"
  if GEMMTUNE_RECORD="$shapes" "$python" "$example" run --json "$out/record-run.json" 2>&1 | tee "$out/record-run.log" \
      && [ "$(problem_lines "$shapes")" -eq 8 ]; then
    note "record: first run, outputs vs F.linear" "passed: $(problem_lines "$shapes") problems recorded"
  else
    fail "record: first run, outputs vs F.linear" "see record-run.log ($(problem_lines "$shapes") problems recorded, 8 expected)"
  fi
  cat "$shapes"

  echo "== gemm-tune --shapes $shapes --budget ${TUNE_BUDGET:-16}"
  local start=$SECONDS
  if "$build/bin/gemm-tune" --shapes "$shapes" --budget "${TUNE_BUDGET:-16}" >"$out/tune.txt" 2>"$out/tune.err"; then
    note "gemm-tune --shapes (budget ${TUNE_BUDGET:-16})" "passed in $((SECONDS - start)) s"
  else
    fail "gemm-tune --shapes (budget ${TUNE_BUDGET:-16})" "see tune.err: $(tail -n 1 "$out/tune.err")"
  fi
  grep -E "^(f32|f16|bf16) |^ +1 " "$out/tune.txt"

  echo "== tuned: the block again; every problem must be tuned and nothing recorded"
  cp "$shapes" "$work/before.txt"
  if GEMMTUNE_RECORD="$shapes" "$python" "$example" run --expect-tuned --json "$out/tuned-run.json" 2>&1 | tee "$out/tuned-run.log" \
      && cmp -s "$shapes" "$work/before.txt"; then
    note "tuned run: every call tuned, outputs match" "passed"
  else
    fail "tuned run: every call tuned, outputs match" "see tuned-run.log (recorded file $(cmp -s "$shapes" "$work/before.txt" && echo unchanged || echo CHANGED))"
  fi

  echo "== benchmark (tools/python_bench.py)"
  if "$python" "$root/tools/python_bench.py" --breakdown --json "$out/python-bench.json" 2>&1 | tee "$out/python-bench.txt"; then
    note "benchmark" "$("$python" - "$out/python-bench.json" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
o = r["overhead"]["16x4096x4096"]
ratios = [m["ratio"] for m in r["model"]]
print(f"linear {o['gemmtune.linear(x, w)']['vs_f_linear']:.2f}x F.linear's host time (16x4096x4096); "
      f"vs F.linear: geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f}; decode {r['decode_ratio']:.2f}x)")
PY
)"
  else
    fail "benchmark" "see python-bench.txt"
  fi

  "$build/bin/gemm-db" list >"$out/db-list.txt" 2>&1
  if "$build/bin/gemm-db" report --html "$out/report.html"; then
    note "gemm-db report" "report.html"
  else
    fail "gemm-db report" "no page"
  fi
}

case "$part" in
  tests) run_tests ;;
  demo) run_demo ;;
  all) run_tests; run_demo ;;
  *) echo "usage: $0 [tests|demo|all]" >&2; exit 2 ;;
esac

echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}"
echo "gpu-python-check: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
