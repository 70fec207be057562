#!/usr/bin/env bash
# The lean server against the full binary: size on disk, and resident memory serving the
# simulator (8 GPUs × 64 processes, 1 s sampling, /metrics scraped every second) after
# SECONDS_UP (30) seconds. The lean build (`--no-default-features`: no charts, fonts or terminal
# UI) is what the Dockerfile and the Helm chart's image ship.
#
#   bash bench/lean.sh OUTDIR
#
# A benchmark: it never fails on a number. Writes summary.txt to OUTDIR.
set -euo pipefail
OUT=$(realpath -m "${1:?usage: bash bench/lean.sh OUTDIR}")
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
SECONDS_UP=${SECONDS_UP:-30}
cargo build --release --quiet
cargo build --release --quiet --no-default-features --target-dir target/lean
source bench/lib.sh
sim_config "$OUT/sim.yml" processes 8 64
measure() {
  local name=$1 bin=$2 port=$3
  "$bin" --source sim --config "$OUT/sim.yml" --sample-interval 1s \
    --web.listen-address "127.0.0.1:$port" --ingest.socket= --log.level warn >"$OUT/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq "$SECONDS_UP"); do
    curl -s -o /dev/null "127.0.0.1:$port/metrics" || true
    sleep 1
  done
  local rss hwm
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  printf '%-6s size %6.2f MB  VmRSS %6.1f MiB  VmHWM %6.1f MiB\n' "$name" \
    "$(echo "$(stat -c %s "$bin") / 1000000" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
}
{
  echo "# $(date -u +%F) $(uname -m), $SECONDS_UP s up, sim 8x64, 1 s sampling, scraped every second"
  measure full target/release/gpumem-exporter 19761
  measure lean target/lean/release/gpumem-exporter 19762
} | tee "$OUT/summary.txt"
