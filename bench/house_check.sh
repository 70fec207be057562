#!/usr/bin/env bash
# On a GPU node, after a change to how the exporter is put together (no change of behaviour
# meant): the NVML readings, overhead and the Python client (bench/gpu_check.sh), the report
# commands on NVML (GPU list, a bad --devices, SIGTERM ending a profile with its report), and
# a real batch-size warm-up to a real OOM recorded and watched live by Prometheus and
# Alertmanager (bench/recorder/device.sh d).
#   cargo build --release && cargo build --release --example nvml_floor
#   (mkdir -p .live && cd .live && apt-get download prometheus prometheus-alertmanager)
#   bash bench/house_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?outdir}
mkdir -p "$OUT/cmd"
BIN=${BIN:-target/release/gpumem-exporter}

SECONDS_PER_RUN=${SECONDS_PER_RUN:-8} bash bench/gpu_check.sh "$OUT/check" >"$OUT/check.txt" 2>&1
echo "gpu_check exit $?" >>"$OUT/check.txt"

{
  echo "== oom on NVML, GPU 0, 5 s"
  "$BIN" oom --source nvml --duration 5 --devices 0 --output "$OUT/cmd/oom.json"
  echo "exit $?"
  echo "== a GPU the node does not have"
  "$BIN" oom --source nvml --duration 5 --devices 9
  echo "exit $?"
  echo "== profile on NVML for 10 minutes, SIGTERM after 6 s"
  "$BIN" profile --source nvml --duration 10m --output "$OUT/cmd/profile.json" &
  p=$!
  sleep 6
  kill -TERM $p
  wait $p
  echo "exit $?"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('interrupted', r['interrupted'], 'duration', r['duration'], 'devices', sorted(r['devices']))" "$OUT/cmd/profile.json"
} >"$OUT/cmd/commands.txt" 2>&1

bash bench/recorder/device.sh "$OUT/rec" d >"$OUT/rec.txt" 2>&1
