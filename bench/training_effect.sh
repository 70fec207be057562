#!/usr/bin/env bash
# A real PyTorch job's step rate with the exporter sampling NVML at the default (1 s) and the
# fastest (10 ms) interval, against no exporter; settings alternated over several rounds.
#   bash bench/training_effect.sh OUTDIR [ROUNDS]
set -euo pipefail
OUT=${1:-training-effect}
ROUNDS=${2:-3}
mkdir -p "$OUT"
BIN=${GPUMEM_BIN:-target/release/gpumem-exporter}
run() { python3 bench/train_steps.py --steps "${STEPS:-300}"; }
with_exporter() {
  "$BIN" --source nvml --sample-interval "$1" --web.listen-address 127.0.0.1:10049 --ingest.socket= 2>/dev/null &
  local e=$!
  sleep 1
  run
  kill $e; wait $e 2>/dev/null || true
}
: > "$OUT/training-effect.jsonl"
for r in $(seq "$ROUNDS"); do
  for setting in none 1s 10ms; do
    if [ $setting = none ]; then res=$(run); else res=$(with_exporter $setting); fi
    echo "{\"round\": $r, \"exporter\": \"$setting\", \"result\": $res}" | tee -a "$OUT/training-effect.jsonl"
  done
done
python3 - "$OUT/training-effect.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["exporter"], []).append(r["result"]["steps_per_s"])
base = statistics.median(by["none"])
print("exporter  steps/s (median)  runs  vs none")
for k in ["none", "1s", "10ms"]:
    m = statistics.median(by[k])
    print(f"{k:8}  {m:16.3f}  {', '.join(f'{v:.2f}' for v in by[k])}  {100*(m-base)/base:+.2f}%")
PY
