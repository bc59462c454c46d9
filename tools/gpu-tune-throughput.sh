#!/usr/bin/env bash
# Tuning throughput on one GPU: the cold tuning time of bf16 and f32 8192^3 (empty kernel cache
# and database), and, for shapes of a suite, the ranked search's winner against the exhaustive
# search's. The two winners are compared in the exhaustive run, where both were timed in the same
# conditions: ratio = (the ranked winner's time) / (the exhaustive winner's time), 1.00 = the
# same kernel. Logs, JSON and both databases (exported) go under $OUT; the summary is printed last.
#
#   tools/gpu-tune-throughput.sh [SHAPES] [LINES]
#     SHAPES  suite file, "M N K dtype layout" per line (default: shared/bench/llm-shapes.txt
#             in or beside the checkout)
#     LINES   the suite's shapes to compare, 1-based, e.g. "1-3,7" (default: all of them). The
#             exhaustive searches take most of the time (about 100 s per shape on an H100): pass a
#             subset when the GPU time is short, and say which.
#   COLD=0 skips the cold 8192^3 runs; BUILD_DIR (default build/) holds the tools.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/tools/gpu-common.sh"
gpu_setup gpu-tune-throughput-out "${1:-}" || exit 2
lines="${2:-all}"
scratch="$(mktemp -d /tmp/gemmtune-throughput-XXXXXX)"
unset GEMMTUNE_DB

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv,noheader \
  | tee "$out/gpu.txt"
git -C "$root" rev-parse --short HEAD 2>/dev/null | tee "$out/commit.txt"

seconds_of() {  # seconds_of START END
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"
}

# tune NAME DB CACHE ARGS...: one gemm-tune process, its wall time in $out/NAME.seconds.
tune() {
  local name="$1" db="$2" cache="$3"
  shift 3
  local start end
  start=$(date +%s.%N)
  GEMMTUNE_CACHE_DIR="$cache" "$bin/gemm-tune" --db "$db" --json "$@" >"$out/$name.json" 2>"$out/$name.log"
  local rc=$?
  end=$(date +%s.%N)
  seconds_of "$start" "$end" >"$out/$name.seconds"
  [ $rc -eq 0 ] || echo "gemm-tune $name failed ($rc): $(tail -n 2 "$out/$name.log")"
}

if [ "${COLD:-1}" != 0 ]; then
  for dtype in bf16 f32; do
    echo "== cold tune, $dtype 8192^3 (empty kernel cache and database)"
    tune "cold-$dtype" "$scratch/cold-$dtype/tuning.db" "$scratch/cold-$dtype" \
      --m 8192 --n 8192 --k 8192 --dtype "$dtype"
    echo "   $(cat "$out/cold-$dtype.seconds") s"
  done
fi

pick "$shapes" "$lines" numbered >"$scratch/chosen.txt"

cache="$scratch/suite-cache"  # one kernel cache for the suite: compile time is not measured here
while read -r index m n k dtype layout; do
  echo "== shape $index: $m $n $k $dtype $layout: ranked, then exhaustive"
  args=(--m "$m" --n "$n" --k "$k" --dtype "$dtype" --layout "$layout")
  tune "shape$index-ranked" "$scratch/ranked-$index.db" "$cache" "${args[@]}"
  tune "shape$index-exhaustive" "$scratch/exhaustive-$index.db" "$cache" "${args[@]}" --exhaustive
  "$bin/gemm-db" --db "$scratch/exhaustive-$index.db" export -o "$out/shape$index-exhaustive-db.json" 2>/dev/null
  "$bin/gemm-tune" "${args[@]}" --dry-run --list --json >"$out/shape$index-model.json" 2>/dev/null
  echo "   ranked $(cat "$out/shape$index-ranked.seconds") s, exhaustive $(cat "$out/shape$index-exhaustive.seconds") s"
done <"$scratch/chosen.txt"

rm -rf "$scratch"
python3 - "$out" "$lines" <<'EOF' | tee "$out/summary.txt"
import glob, json, os, re, sys
out, lines = sys.argv[1], sys.argv[2]

def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None

def seconds(name):
    try:
        return float(open(os.path.join(out, name + ".seconds")).read())
    except Exception:
        return float("nan")

print("\nsummary: tuning throughput on", open(os.path.join(out, "gpu.txt")).read().strip())
for dtype, target in (("bf16", 10), ("f32", 30)):
    j = load(os.path.join(out, f"cold-{dtype}.json"))
    if not j:
        continue
    best = j.get("best", {})
    ratio = j.get("ratio_to_cublas")
    ratio_text = f"{ratio:.3f}x" if ratio else "-"
    print(f"cold tune {dtype} 8192^3: {seconds('cold-' + dtype):.1f} s (target <= {target} s), "
          f"{j.get('measured')} measured, {j.get('ruled_out')} ruled out by the cost model, winner "
          f"{best.get('kernel')} {best.get('median_ms', 0):.4g} ms, vs cuBLAS {ratio_text}")

rows = []
for path in sorted(glob.glob(os.path.join(out, "shape*-ranked.json")), key=lambda p: int(re.findall(r"shape(\d+)", p)[0])):
    index = re.findall(r"shape(\d+)", path)[0]
    ranked, exhaustive = load(path), load(os.path.join(out, f"shape{index}-exhaustive.json"))
    db, model = load(os.path.join(out, f"shape{index}-exhaustive-db.json")), load(os.path.join(out, f"shape{index}-model.json"))
    if not ranked or not exhaustive or "best" not in ranked or "best" not in exhaustive:
        rows.append((index, ranked.get("problem", "?") if ranked else "?", "failed", "", "", "", "", "", ""))
        continue
    times = {}
    for entry in (db or {}).get("entries", []):
        for c in entry["candidates"]:
            if c["status"] == "ok":
                times[c["kernel_name"]] = c["median_ms"]
    r_name, e_name = ranked["best"]["kernel"], exhaustive["best"]["kernel"]
    ratio = times.get(r_name, float("nan")) / times.get(e_name, float("nan")) if e_name in times else float("nan")
    names = [c["name"] for c in (model or {}).get("candidates", [])]
    rank = names.index(e_name) + 1 if e_name in names else -1
    rows.append((index, ranked["problem"].split(" lda")[0], f"{seconds(f'shape{index}-ranked'):.1f}",
                 str(ranked["measured"]), f"{seconds(f'shape{index}-exhaustive'):.1f}", str(exhaustive["measured"]),
                 f"{ratio:.3f}", str(rank), "same" if r_name == e_name else r_name + " / " + e_name))

header = ("#", "problem", "ranked s", "measured", "exhaustive s", "measured", "ratio", "model rank", "winners (ranked / exhaustive)")
widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
print(f"\nranked search vs --exhaustive (shapes: {lines}); ratio = ranked winner's time / exhaustive winner's, "
      "both timed in the exhaustive run (target <= 1.01); model rank = where the cost model put the exhaustive winner")
for r in [header] + rows:
    print("  " + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
bad = [r for r in rows if r[6] in ("", "nan") or (r[6] and float(r[6]) > 1.01)]
print(f"\n{len(rows) - len(bad)} of {len(rows)} shapes within 1% of the exhaustive winner")
EOF
