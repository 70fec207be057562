#!/usr/bin/env bash
# The live page test on a GPU node: the exporter on NVML (1 s), a real Prometheus with
# alerts/ (scrape and evaluation every SCRAPE, default 5s), a real Alertmanager routing to a
# webhook receiver that timestamps every page, and real PyTorch jobs run to a real
# torch.OutOfMemoryError (recorded with the Python client's recorder, and reporting to the
# exporter through the client as a user's job does). Also samples the RSS and CPU time of the
# exporter and of a process that only polls NVML the same way (examples/nvml_floor.rs).
#
#   cargo build --release && cargo build --release --example nvml_floor
#   (cd DEBS && apt-get download prometheus prometheus-alertmanager)
#   DEBS=DEBS bash bench/live/run.sh OUTDIR
#   python3 bench/live/leads.py OUTDIR          # the table of page leads
#
# Needs python3 with torch and transformers on the node; nothing from the network.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?outdir}
mkdir -p "$OUT"
DEBS=${DEBS:-.live}
SCRAPE=${SCRAPE:-5s}
BIN=${GPUMEM_BIN:-target/release/gpumem-exporter}
FLOOR_BIN=${FLOOR_BIN:-target/release/examples/nvml_floor}
source bench/live/stack.sh
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
live_stack "$OUT" || exit 1
pids+=("${LIVE_PIDS[@]}")
"$FLOOR_BIN" 100000 1000 >"$OUT/floor.log" 2>&1 &
FLOOR=$!; pids+=($FLOOR)

# RSS (KiB) and CPU ticks of the exporter and of the NVML-only poller, every 5 s.
(
  while sleep 5; do
    echo "$(date +%s.%N) $(awk '/VmRSS/{print $2}' /proc/$EXP/status) $(awk '/VmRSS/{print $2}' /proc/$FLOOR/status) $(awk '{print $14+$15}' /proc/$EXP/stat) $(awk '{print $14+$15}' /proc/$FLOOR/stat)"
  done
) >"$OUT/rss.txt" &
pids+=($!)
sleep 10

rec() { # name limit command...
  local name=$1 limit=$2; shift 2
  echo "== $name start $(date +%s.%N)" | tee -a "$OUT/runs.txt"
  timeout -s INT "$limit" python3 -m gpumem_client record -o "$OUT/$name.jsonl" --interval 0.5 \
    --scenario "$name" -- "$@" >"$OUT/$name.log" 2>&1
  echo "   $name end $(date +%s.%N) exit $?" | tee -a "$OUT/runs.txt"
  pkill -f bench/crashes/workloads.py 2>/dev/null
  sleep 15
}
# Healthy first: a crash keeps the GPU at high risk for 5 minutes after (recent OOM).
rec live-healthy-train-eval 100 python3 bench/crashes/workloads.py healthy-train-eval --duration 60 --seed 3
rec live-kept-logits 330 python3 bench/crashes/workloads.py kept-logits --growth-s 150 --delay-s 30 --seed 3
live_collect "$OUT"
