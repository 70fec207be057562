#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: the exporter's CPU time per sample against the NVML floor
# (a plain loop of the same NVML calls, examples/nvml_floor.rs), in the same run, and the
# exporter's readings against nvidia-smi while a PyTorch process holds memory.
#
# Build first (a Rust toolchain is not needed on the GPU machine):
#   cargo build --release && cargo build --release --example nvml_floor
# Then on the GPU machine, from the repository root:
#   bash bench/nvml_overhead.sh [OUTDIR]
set -euo pipefail
OUT=${1:-bench-out}
mkdir -p "$OUT"
source bench/lib.sh
FLOOR=${GPUMEM_FLOOR:-target/release/examples/nvml_floor}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
# The exporter is scraped this often (seconds) during its window, as Prometheus would, and the
# scrapes' CPU counts in its figure: a snapshot is built for a scrape, not for every sample.
# 0: no scrapes.
SCRAPE_EVERY=${SCRAPE_EVERY:-15}
PORT=10049

# A process holding GPU memory, so the process list is not empty.
python3 - <<'PY' &
import torch, time
x = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
y = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
time.sleep(600)
PY
HOLDER=$!
trap 'kill $HOLDER 2>/dev/null || true; kill $EXP 2>/dev/null || true' EXIT
for _ in $(seq 60); do nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q "$HOLDER" && break; sleep 1; done

# Per thread of a pid: name, on-CPU nanoseconds, nanoseconds waiting to run, times scheduled in.
threads() {
  local t
  for t in /proc/"$1"/task/*; do echo "$(cat "$t/comm") $(cat "$t/schedstat")"; done
}

run_exporter() { # interval, name for its files
  local iv=$1 name=$2
  # shellcheck disable=SC2086 # EXPORTER_ARGS: more flags, split on spaces
  "$BIN" --source nvml --sample-interval "$iv" --web.listen-address 127.0.0.1:$PORT --ingest.socket= ${EXPORTER_ARGS:-} 2>"$OUT/exporter-$name.log" &
  EXP=$!
  for _ in $(seq 100); do curl -sf localhost:$PORT/-/ready >/dev/null && break; sleep 0.1; done
  local s0 c0 s1 c1
  s0=$(curl -s localhost:$PORT/metrics | awk '/^gpumem_exporter_samples_total/{print $2}')
  c0=$(cpu_seconds $EXP)
  threads $EXP > "$OUT/threads-$name-start.txt"
  local scraper=
  if [[ $SCRAPE_EVERY != 0 ]]; then
    (while sleep "$SCRAPE_EVERY"; do curl -s -o /dev/null localhost:$PORT/metrics; done) &
    scraper=$!
  fi
  sleep "$SECONDS_PER_RUN"
  [[ -n $scraper ]] && kill $scraper
  threads $EXP > "$OUT/threads-$name-end.txt"
  s1=$(curl -s localhost:$PORT/metrics | awk '/^gpumem_exporter_samples_total/{print $2}')
  c1=$(cpu_seconds $EXP)
  grep VmRSS /proc/$EXP/status | awk '{print $2}' > "$OUT/rss-kib-$name.txt"
  curl -s localhost:$PORT/metrics > "$OUT/metrics-$name.txt"
  kill $EXP; wait $EXP 2>/dev/null || true
  python3 -c "import json;print(json.dumps({'interval':'$iv','samples':$s1-$s0,'scrape_every_s':$SCRAPE_EVERY,'cpu_seconds':$c1-$c0,'cpu_us_per_sample':($c1-$c0)/max(1,$s1-$s0)*1e6}))"
}

{
  echo "# nvidia-smi at the start"
  nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,memory.free,memory.reserved --format=csv,noheader,nounits || \
    nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,memory.free --format=csv,noheader,nounits
  nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
} > "$OUT/nvidia-smi.txt"

# Floor and exporter alternate, interval by interval (INTERVALS, in ms: 1000ms for the default
# 1 s); a repeated interval gets a numbered file, so the spread between runs is on record.
# EXPORTER_ARGS: more exporter flags (e.g. --config FILE to compare settings).
INTERVALS=${INTERVALS:-10ms 100ms 10ms}
declare -A round=()
for interval in $INTERVALS; do
  round[$interval]=$(( ${round[$interval]:-0} + 1 ))
  suffix=$interval; (( round[$interval] > 1 )) && suffix=$interval-${round[$interval]}
  ms=${interval%ms}
  "$FLOOR" "$SECONDS_PER_RUN" "$ms" > "$OUT/floor-$suffix.json"
  run_exporter "$interval" "$suffix" > "$OUT/exporter-$suffix.json"
  echo "floor    $suffix: $(cat "$OUT/floor-$suffix.json")"
  echo "exporter $suffix: $(cat "$OUT/exporter-$suffix.json")"
done

# Readings against nvidia-smi, taken close together.
"$BIN" --source nvml --sample-interval 1s --web.listen-address 127.0.0.1:$PORT --ingest.socket= 2>/dev/null &
EXP=$!
for _ in $(seq 100); do curl -sf localhost:$PORT/-/ready >/dev/null && break; sleep 0.1; done
sleep 2
curl -s localhost:$PORT/metrics > "$OUT/compare-metrics.txt"
nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,memory.free --format=csv,noheader,nounits > "$OUT/compare-smi-gpu.csv"
nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits > "$OUT/compare-smi-apps.csv"
kill $EXP; wait $EXP 2>/dev/null || true
python3 - "$OUT" <<'PY'
import re, sys, csv
out = sys.argv[1]
m = open(f"{out}/compare-metrics.txt").read()
def val(name, **labels):
    for line in m.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
MiB = 1 << 20
# nvidia-smi (driver 580) shows memory.used without the driver's reservation, like NVML's
# v2 `used` that the exporter serves as gpumem_used_bytes.
print("gpu  total(smi MiB / exporter MiB)  used(smi / exporter)  free(smi / exporter)")
for row in csv.reader(open(f"{out}/compare-smi-gpu.csv")):
    idx, uuid, total, used, free = [c.strip() for c in row]
    t = val("gpumem_total_bytes", gpu=idx) / MiB
    u = val("gpumem_used_bytes", gpu=idx) / MiB
    f = val("gpumem_free_bytes", gpu=idx) / MiB
    print(f"{idx}    {total} / {t:.0f}    {used} / {u:.0f}    {free} / {f:.0f}")
print("process (smi gpu_uuid pid MiB / exporter MiB)")
for row in csv.reader(open(f"{out}/compare-smi-apps.csv")):
    uuid, pid, used = [c.strip() for c in row]
    e = val("gpumem_process_used_bytes", uuid=uuid, pid=pid)
    print(f"{uuid} {pid} {used} / {e / MiB if e is not None else None}")
PY
