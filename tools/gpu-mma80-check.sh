#!/usr/bin/env bash
# The GPU check of the mma_sm80 family (mma.sync + ldmatrix + cp.async), for the GPU machine.
# On a Hopper GPU the family runs as sm_90a code beside wgmma_sm90; GEMMTUNE_FAMILIES=mma_sm80
# makes the library use it alone. Steps, each logged under $OUT (default ./gpu-mma80-out):
#   1. the ceiling: mma.sync.m16n8k16 issue rate from registers (gemm-bench --mma-ceiling)
#   2. correctness: gpu_mma_sm80_correctness (all layouts, tails, alignments, library end to end)
#   3. compute-sanitizer memcheck and racecheck on small shapes
#   4. gemm-tune --families mma_sm80 on bf16 8192^3 and 4096^3, nn and tn (fresh database)
#   5. gemm-bench of those problems, the library restricted to the family, against cuBLAS
#   6. SASS of the winners: HMMA.16816, LDSM, LDGSTS, no local memory (cuobjdump)
#   7. Nsight Compute: shared-memory bank conflicts of a winner (loads and stores)
#   8. (only when asked) gemm-bench over shared/bench/llm-shapes.txt (or $LLM_SHAPES), untuned,
#      geometric mean
# A summary table comes last.
#   tools/gpu-mma80-check.sh                  steps 1-7, uses build/ (built here or carried)
#   STEPS="1 2 3" tools/gpu-mma80-check.sh    some steps (5-7 need 4 in the same run); about
#                                             5 minutes for 1-3 and 6 for 4-7 on an H100
#   BUDGET=40 tools/gpu-mma80-check.sh        per tuned problem: candidates or time (default 60s)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-$root/gpu-mma80-out}"
budget="${BUDGET:-60s}"
mkdir -p "$out"
export GEMMTUNE_CACHE_DIR="${GEMMTUNE_CACHE_DIR:-$(mktemp -d /tmp/gemmtune-mma80-XXXXXX)}"
db="$out/mma80-tuning.db"  # fresh: its bests are this family's only
rm -f "$db"
status=0
summary=()
note() { summary+=("$(printf '%-34s %s' "$1" "$2")"); }
have() { command -v "$1" >/dev/null 2>&1; }
want() { [[ " ${STEPS:-1 2 3 4 5 6 7} " == *" $1 "* ]]; }

echo "== GPU" | tee "$out/gpu-info.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv 2>&1 | tee -a "$out/gpu-info.txt"

# csv_columns FILE NAME...: those columns of a CSV with a header, comma-separated, header dropped.
csv_columns() {
  python3 -c "
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(','.join(row[c] for c in sys.argv[2:]))" "$@"
}

# The bf16 ceiling in TFLOP/s (also for step 5's "% of ceiling" when step 1 is not run).
measure_ceiling() {
  "$build/bin/gemm-bench" --mma-ceiling 2>"$out/ceiling.err" | tee "$out/ceiling.txt"
  ceiling=$(awk '$1 == "bf16" && $3 == "TFLOP/s" { print $2 }' "$out/ceiling.txt")
}
ceiling=""
if want 1; then
  echo "== 1. mma.sync.m16n8k16 ceiling (from registers)"
  measure_ceiling
  note "mma.sync ceiling bf16 (TFLOP/s)" "${ceiling:-FAILED}"
  [ -n "$ceiling" ] || status=1
fi

if want 2; then
echo "== 2. correctness (gpu_mma_sm80_correctness)"
if "$build/bin/gpu_mma_sm80_correctness" >"$out/correctness.log" 2>&1; then
  note "correctness" "$(grep -E '^\[  PASSED  \]' "$out/correctness.log" | head -1)"
else
  status=1
  note "correctness" "FAILED (correctness.log)"
fi
tail -n 4 "$out/correctness.log"
fi

if want 3; then
echo "== 3. compute-sanitizer on small shapes"
for tool in memcheck racecheck; do
  if ! have compute-sanitizer; then note "sanitizer $tool" "skipped: no compute-sanitizer"; continue; fi
  if compute-sanitizer --tool "$tool" --error-exitcode 1 "$build/bin/gpu_mma_sm80_correctness" \
       --gtest_filter='*Mma80Sanitizer*' >"$out/sanitizer-$tool.log" 2>&1; then
    note "sanitizer $tool" "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tail -1)"
  else
    status=1
    note "sanitizer $tool" "FAILED (sanitizer-$tool.log)"
  fi
done
fi

problems=("8192 8192 8192 nn" "8192 8192 8192 tn" "4096 4096 4096 nn" "4096 4096 4096 tn")
shapes="$out/shapes.txt"
: >"$shapes"
for p in "${problems[@]}"; do
  read -r m n k layout <<<"$p"
  echo "$m $n $k bf16 $layout" >>"$shapes"
done
if want 4; then
echo "== 4. gemm-tune --families mma_sm80 --budget $budget"
mkdir -p "$out/sources"
for p in "${problems[@]}"; do
  read -r m n k layout <<<"$p"
  log="$out/tune-${layout}-${m}.txt"
  if GEMMTUNE_DUMP_SOURCE="$out/sources" "$build/bin/gemm-tune" --m "$m" --n "$n" --k "$k" --dtype bf16 \
       --layout "$layout" --families mma_sm80 --budget "$budget" --db "$db" >"$log" 2>"${log%.txt}.err"; then
    grep -E "^winner" "$log"
  else
    status=1
    echo "gemm-tune failed on $p: ${log%.txt}.err"
  fi
done
fi

if want 5; then
[ -n "$ceiling" ] || measure_ceiling >/dev/null
echo "== 5. gemm-bench, library restricted to mma_sm80 (GEMMTUNE_FAMILIES=mma_sm80)"
GEMMTUNE_FAMILIES=mma_sm80 "$build/bin/gemm-bench" --shapes "$shapes" --db "$db" --csv "$out/bench.csv" \
  2>"$out/bench.err" | tee "$out/bench.txt" || status=1
# The CSV's columns by name (gemm-bench adds columns over time).
while IFS=, read -r dtype layout m n k kernel source tflops ctflops ratio; do
  pct=$(awk -v t="$tflops" -v c="${ceiling:-0}" 'BEGIN { if (c > 0) printf "%.0f%% of ceiling", 100 * t / c; else print "-" }')
  note "$dtype $layout ${m}x${n}x${k}" "$tflops TFLOP/s ($pct), cuBLAS $ctflops TFLOP/s, ratio $ratio, $kernel ($source)"
done < <(csv_columns "$out/bench.csv" dtype layout m n k kernel source ours_tflops cublas_tflops ratio)
fi

llm_shapes="${LLM_SHAPES:-$root/../shared/bench/llm-shapes.txt}"
if want 8 && [ -f "$llm_shapes" ]; then
  echo "== 8. gemm-bench over llm-shapes.txt (untuned: defaults or nearest tuned shape)"
  GEMMTUNE_FAMILIES=mma_sm80 "$build/bin/gemm-bench" --shapes "$llm_shapes" --db "$db" \
    --csv "$out/bench-llm.csv" 2>"$out/bench-llm.err" | tee "$out/bench-llm.txt" || status=1
  geomean=$(csv_columns "$out/bench-llm.csv" ratio | awk '$1 > 0 { s += log($1); n++ } END { if (n) printf "%.3f over %d shapes", exp(s / n), n }')
  note "llm-shapes geomean ratio" "${geomean:-FAILED}"
fi

if want 6; then
echo "== 6. SASS of the winners (cuobjdump)"
arch=$(awk -F, 'NR == 2 { gsub(/ /, ""); print $2 }' <(nvidia-smi --query-gpu=name,compute_cap --format=csv 2>/dev/null) | tr -d .)
[ "$arch" = 90 ] && arch=90a
winners=$(awk -F, 'NR > 1 { print $7 }' "$out/bench.csv" 2>/dev/null | sort -u)
if have nvcc && have cuobjdump && [ -n "$winners" ]; then
  for w in $winners; do
    src="$out/sources/$w.cu"
    [ -f "$src" ] || { note "SASS $w" "no source dumped"; continue; }
    cubin="$out/$w.sm_$arch.cubin"
    if nvcc -x cu -gencode="arch=compute_$arch,code=sm_$arch" -cubin -I "$root/templates" -o "$cubin" "$src" \
         2>"$out/$w.nvcc.log"; then
      cuobjdump --dump-sass "$cubin" >"$out/$w.sass"
      hmma=$(grep -c 'HMMA.16816.F32.BF16' "$out/$w.sass")
      ldsm=$(grep -c 'LDSM' "$out/$w.sass")
      ldgsts=$(grep -c 'LDGSTS' "$out/$w.sass")
      local_mem=$(grep -cE '\b(LDL|STL)\b' "$out/$w.sass")
      note "SASS $w" "HMMA.16816.F32.BF16 $hmma, LDSM $ldsm, LDGSTS $ldgsts, LDL/STL $local_mem"
      [ "$hmma" -gt 0 ] && [ "$ldsm" -gt 0 ] && [ "$ldgsts" -gt 0 ] && [ "$local_mem" -eq 0 ] || status=1
    else
      note "SASS $w" "nvcc failed ($w.nvcc.log)"
      status=1
    fi
  done
else
  note "SASS" "skipped: needs nvcc, cuobjdump and a winner (step 5)"
fi
fi

if want 7; then
echo "== 7. Nsight Compute: shared-memory bank conflicts (4096^3 tn winner)"
if have ncu; then
  wanted="l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
          l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum
          l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum
          smsp__inst_executed_op_ldsm.sum smsp__inst_executed_op_ldgsts.sum"
  available=$(ncu --query-metrics 2>/dev/null | awk '{ print $1 }')
  metrics=""
  for w in $wanted; do
    grep -qx "${w%.sum}" <<<"$available" && metrics="$metrics,$w"
  done
  metrics="${metrics#,}"
  echo "4096 4096 4096 bf16 tn" >"$out/ncu-shape.txt"
  if GEMMTUNE_FAMILIES=mma_sm80 ncu --clock-control none --metrics "$metrics" -k regex:gemm_mma80 -c 1 \
       "$build/bin/gemm-bench" --shapes "$out/ncu-shape.txt" --db "$db" >"$out/ncu.txt" 2>&1; then
    while read -r name unit value; do
      note "ncu $name" "$value"
    done < <(grep -E 'bank_conflicts|wavefronts|inst_executed' "$out/ncu.txt" | awk '{ print $1, $2, $NF }')
  else
    note "ncu" "FAILED (ncu.txt)"
    status=1
  fi
else
  note "ncu" "skipped: no ncu"
fi
fi

echo
echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
echo "gpu-mma80-check: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
