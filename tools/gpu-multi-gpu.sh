#!/usr/bin/env bash
# Every GPU of a host, and many hosts, on a host with two or more GPUs of one model:
#   1. the suite on one GPU (--devices 0), then on all of them (--devices all): shapes per
#      minute, and every shape tuned exactly once;
#   2. two shard processes started as Slurm (srun) starts them, one per GPU, each with its own
#      database (--db db-%t.db), merged with gemm-db merge; the merged choices must be those of
#      the shard that tuned each shape, and are compared with the one-database run of step 1;
#   3. the same with the variables of Open MPI's mpirun, on the first LINES_MPI shapes.
# Every run starts with an empty kernel cache and database. Logs, JSON and exported databases go
# under $OUT; the summary is printed last.
#
#   tools/gpu-multi-gpu.sh [SHAPES] [LINES]
#     SHAPES  suite file (default: shared/bench/llm-shapes.txt in or beside the checkout)
#     LINES   the shapes to tune, 1-based, e.g. "1-10" (default: all)
#   LINES_MPI (default 1-4): the shapes of step 3.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/tools/gpu-common.sh"
gpu_setup gpu-multi-gpu-out "${1:-}" || exit 2
scratch="$(mktemp -d /tmp/gemmtune-multi-XXXXXX)"
unset GEMMTUNE_DB SLURM_PROCID SLURM_NTASKS SLURM_STEP_ID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE RANK WORLD_SIZE

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus.txt"
git -C "$root" rev-parse --short HEAD 2>/dev/null | tee "$out/commit.txt"

pick "$shapes" "${2:-all}" >"$scratch/suite.txt"
pick "$shapes" "${LINES_MPI:-1-4}" >"$scratch/suite-mpi.txt"
echo "$(wc -l <"$scratch/suite.txt") shapes"

# run NAME ENV... -- ARGS...: one gemm-tune process in its own empty cache; wall time in NAME.seconds.
run() {
  local name="$1" start end
  shift
  start=$(date +%s.%N)
  env "$@" >"$out/$name.json" 2>"$out/$name.log"
  local rc=$?
  end=$(date +%s.%N)
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$end" >"$out/$name.seconds"
  [ $rc -eq 0 ] || echo "$name failed ($rc): $(tail -n 2 "$out/$name.log")"
}

echo "== 1. the suite on GPU 0, then on every GPU"
run one-gpu GEMMTUNE_CACHE_DIR="$scratch/c1" "$bin/gemm-tune" --shapes "$scratch/suite.txt" --devices 0 \
  --db "$scratch/one.db" --json
run all-gpus GEMMTUNE_CACHE_DIR="$scratch/c2" "$bin/gemm-tune" --shapes "$scratch/suite.txt" --devices all \
  --db "$scratch/all.db" --json
"$bin/gemm-db" --db "$scratch/all.db" export -o "$out/all-gpus-db.json" 2>/dev/null

echo "== 2. two shards as srun starts them (SLURM_PROCID/SLURM_NTASKS), one per GPU"
for rank in 0 1; do
  run "slurm-$rank" GEMMTUNE_CACHE_DIR="$scratch/s$rank" SLURM_STEP_ID=0 SLURM_PROCID=$rank SLURM_NTASKS=2 \
    CUDA_VISIBLE_DEVICES=$rank "$bin/gemm-tune" --shapes "$scratch/suite.txt" --db "$scratch/slurm-%t.db" --json &
done
wait
"$bin/gemm-db" merge "$scratch/slurm-merged.db" "$scratch/slurm-0.db" "$scratch/slurm-1.db" | tee "$out/slurm-merge.txt"
"$bin/gemm-db" --db "$scratch/slurm-merged.db" export -o "$out/slurm-merged-db.json" 2>/dev/null

echo "== 3. two shards as mpirun starts them (OMPI_COMM_WORLD_RANK/_SIZE), one per GPU"
for rank in 0 1; do
  run "mpi-$rank" GEMMTUNE_CACHE_DIR="$scratch/m$rank" OMPI_COMM_WORLD_RANK=$rank OMPI_COMM_WORLD_SIZE=2 \
    CUDA_VISIBLE_DEVICES=$rank "$bin/gemm-tune" --shapes "$scratch/suite-mpi.txt" --db "$scratch/mpi-%t.db" --json &
done
wait
"$bin/gemm-db" merge "$scratch/mpi-merged.db" "$scratch/mpi-0.db" "$scratch/mpi-1.db" | tee "$out/mpi-merge.txt"
"$bin/gemm-db" --db "$scratch/mpi-merged.db" export -o "$out/mpi-merged-db.json" 2>/dev/null
grep -h "shard" "$out"/slurm-*.log "$out"/mpi-*.log | tee "$out/shards.txt"
rm -rf "$scratch"

python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]

def load(name):
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
    except Exception:
        return []
    return j["problems"] if "problems" in j else [j]

def seconds(name):
    try:
        return float(open(os.path.join(out, name + ".seconds")).read())
    except Exception:
        return float("nan")

def bests(export):
    try:
        j = json.load(open(os.path.join(out, export)))
    except Exception:
        return {}
    found = {}
    for e in j["entries"]:
        p = e["problem"]
        key = f"{p['dtype']} {p['layout']} {p['m']}x{p['n']}x{p['k']}"
        for b in e.get("best", []):
            found[key] = b["kernel_name"]
    return found

def key_of(report):
    return " ".join(report["problem"].split()[:3])

print("\nsummary:", open(os.path.join(out, "gpus.txt")).read().strip().replace("\n", "; "))
one, every = load("one-gpu"), load("all-gpus")
t1, t2 = seconds("one-gpu"), seconds("all-gpus")
gpus = sorted({r.get("gpu") for r in every})
print(f"1 GPU: {len(one)} shapes in {t1:.1f} s = {60 * len(one) / t1:.2f} shapes/min")
print(f"--devices all ({len(gpus)} GPUs): {len(every)} shapes in {t2:.1f} s = {60 * len(every) / t2:.2f} shapes/min")
print(f"speed-up: {t1 / t2:.2f}x (target >= 1.8x on two GPUs)")
names = [key_of(r) for r in every]
tuned = [r for r in every if "best" in r]
print(f"every shape once: {len(set(names)) == len(names) == len(one)}; tuned {len(tuned)} of {len(every)}; "
      f"per GPU: " + ", ".join(f"GPU {g}: {sum(1 for r in every if r.get('gpu') == g)}" for g in gpus))

for style, count in (("slurm", 2), ("mpi", 2)):
    shard_reports = [r for rank in range(count) for r in load(f"{style}-{rank}")]
    merged = bests(f"{style}-merged-db.json")
    single = bests("all-gpus-db.json")
    same_as_shard = sum(1 for r in shard_reports if "best" in r and merged.get(key_of(r)) == r["best"]["kernel"])
    same_as_single = sum(1 for k, v in merged.items() if single.get(k) == v)
    print(f"{style}: {len(shard_reports)} shapes in {count} shards ({', '.join(f'{seconds(style + chr(45) + str(i)):.1f} s' for i in range(count))}); "
          f"merged database: {len(merged)} bests, {same_as_shard} of {len(shard_reports)} the shard's own choice "
          f"(must be all); {same_as_single} of {len(merged)} the same kernel as the one-database run "
          "(a different run: near-ties may differ)")
EOF
