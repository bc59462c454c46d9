#!/usr/bin/env bash
# The tuning service end to end on a GPU machine (docs/PERF.md, "Tuning while serving"):
#  1. two model processes (tools/tune_service_demo.py, the same decode-step GEMMs) run with
#     GEMMTUNE_TUNE=background and queue their untuned problems in one database;
#  2. a daemon (gemm-tune --serve) starts tuning them and is killed (SIGKILL) mid-tune;
#  3. a second daemon puts the dead one's claim back, resumes it and tunes the rest;
#  4. the models take up each tuned kernel without a restart (their logs: sources, time per step);
#  5. GEMMTUNE_TUNE=now: a process's first call of a new problem waits while it is tuned.
# Every problem must be tuned once (the queue's attempts: 1, or 2 for the one killed mid-tune).
#
#   tools/gpu-tune-service.sh [OUT_DIR]     (default: ./tune-service-out; build/ must be built)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(realpath -m "${1:-tune-service-out}")
mkdir -p "$out"
bin=$PWD/build/bin
export GEMMTUNE_LIBRARY=$PWD/build/lib/libgemmtune.so GEMMTUNE_BIN_DIR=$bin
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export GEMMTUNE_DB=$out/service.db GEMMTUNE_CACHE_DIR=${GEMMTUNE_CACHE_DIR:-$out/cache}
export GEMMTUNE_LOG_LEVEL=info GEMMTUNE_REFRESH_S=0.5
rm -f "$GEMMTUNE_DB"*
budget=${BUDGET:-12}     # candidates per problem
# DAEMON_DEVICES=1: the daemons tune on GPU 1 while the models run on GPU 0 (a spare GPU)
daemon_args=(--budget "$budget" --poll 0.5 ${DAEMON_DEVICES:+--devices "$DAEMON_DEVICES"})
model_s=${MODEL_S:-200}  # how long the models run

queue_json() { "$bin/gemm-tune" --status --json --db "$GEMMTUNE_DB" 2>/dev/null; }
count_state() {  # entries in state $1
  queue_json | python3 -c "import json,sys; print(sum(e['state']=='$1' for e in json.load(sys.stdin)['queue']))"
}
log() { echo "$(date +%T) $*" | tee -a "$out/steps.log"; }

log "models start (GEMMTUNE_TUNE=background)"
GEMMTUNE_TUNE=background python3 tools/tune_service_demo.py --seconds "$model_s" --name a \
  >"$out/model_a.jsonl" 2>"$out/model_a.err" &
model_a=$!
GEMMTUNE_TUNE=background python3 tools/tune_service_demo.py --seconds "$model_s" --name b \
  >"$out/model_b.jsonl" 2>"$out/model_b.err" &
model_b=$!
sleep 15
"$bin/gemm-tune" --status --db "$GEMMTUNE_DB" | tee -a "$out/steps.log"

log "daemon 1 starts"
"$bin/gemm-tune" --serve "${daemon_args[@]}" >"$out/daemon1.out" 2>"$out/daemon1.err" &
daemon=$!
for _ in $(seq 1 120); do  # kill it once a problem is done and another is being tuned
  [ "$(count_state done)" -ge 1 ] && [ "$(count_state tuning)" -ge 1 ] && break
  sleep 0.5
done
sleep 3
kill -9 "$daemon" || true
wait "$daemon" 2>/dev/null || true
log "daemon 1 killed (SIGKILL) mid-tune"
"$bin/gemm-tune" --status --db "$GEMMTUNE_DB" | tee -a "$out/steps.log"

log "daemon 2 starts"
"$bin/gemm-tune" --serve "${daemon_args[@]}" >"$out/daemon2.out" 2>"$out/daemon2.err" &
daemon=$!
for _ in $(seq 1 600); do
  [ "$(count_state queued)" -eq 0 ] && [ "$(count_state tuning)" -eq 0 ] && break
  sleep 0.5
done
log "queue empty"
kill -TERM "$daemon" || true
wait "$daemon" || true
wait "$model_a" "$model_b" || true
"$bin/gemm-tune" --status --db "$GEMMTUNE_DB" | tee -a "$out/steps.log"
queue_json >"$out/queue.json"

log "GEMMTUNE_TUNE=now: a new problem's first call"
GEMMTUNE_TUNE=now GEMMTUNE_TUNE_BUDGET=$budget python3 - <<'EOF' 2>"$out/now.err" | tee -a "$out/steps.log"
import time, torch, gemmtune
x = torch.randn(24, 5120, device="cuda", dtype=torch.bfloat16)
w = torch.randn(13824, 5120, device="cuda", dtype=torch.bfloat16)
start = time.monotonic(); gemmtune.linear(x, w); torch.cuda.synchronize()
first = time.monotonic() - start
start = time.monotonic(); gemmtune.linear(x, w); torch.cuda.synchronize()
print(f"first call {first:.1f} s, second {1e3 * (time.monotonic() - start):.2f} ms, after:",
      gemmtune.select_linear(x, w).source)
EOF
log "GEMMTUNE_TUNE=now: two processes' first calls of one new problem"
for name in c d; do
  GEMMTUNE_TUNE=now GEMMTUNE_TUNE_BUDGET=$budget python3 - "$name" <<'EOF' 2>"$out/now_$name.err" &
import sys, time, torch, gemmtune
x = torch.randn(40, 3072, device="cuda", dtype=torch.bfloat16)
w = torch.randn(9216, 3072, device="cuda", dtype=torch.bfloat16)
start = time.monotonic(); gemmtune.linear(x, w); torch.cuda.synchronize()
print(f"process {sys.argv[1]}: first call {time.monotonic() - start:.1f} s, then",
      gemmtune.select_linear(x, w).source, flush=True)
EOF
done
wait
"$bin/gemm-tune" --status --db "$GEMMTUNE_DB" | tee -a "$out/steps.log"
log "done"
