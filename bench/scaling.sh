#!/usr/bin/env bash
# CPU and resident memory of the exporter on the simulator against the number of GPUs, the
# processes per GPU and the sample interval.
#
#   bash bench/scaling.sh OUTDIR
#
# Grid (21 points, about 12 minutes): GPUs 1, 2, 4, 8 with 64 processes each, and processes per
# GPU 1, 16, 64, 256 on 8 GPUs, each at --sample-interval 10ms, 100ms and 1s (scenario
# `processes`; history.max_processes raised to 4096 so that 8×256 is not capped at 1024).
# Per point: WARMUP (10) s, then CPU (the process CPU clock, cpu_seconds in lib.sh) over WINDOW (20) s
# with no scrapes, VmRSS at the end of the window, then 3 scrapes of /metrics (median time and
# size). GRID="gpus:procs ..." and INTERVALS="..." override the grid.
#
# GPUMEM_BIN: the binary (default target/release/gpumem-exporter, built if missing or stale).
# Writes scaling.csv, the configs and summary.txt to OUTDIR. A benchmark: it never fails on a
# number.
set -euo pipefail
SELF=$(realpath "$0")
OUT=$(realpath -m "${1:?usage: bash bench/scaling.sh OUTDIR}")
cd "$(dirname "$SELF")/.."
mkdir -p "$OUT"
source bench/lib.sh
WARMUP=${WARMUP:-10}
WINDOW=${WINDOW:-20}
GRID=${GRID:-"1:64 2:64 4:64 8:64 8:1 8:16 8:256"}
INTERVALS=${INTERVALS:-"10ms 100ms 1s"}
read -ra POINTS <<< "$GRID"
read -ra IVS <<< "$INTERVALS"
LIMIT=$(( ${#POINTS[@]} * ${#IVS[@]} * (WARMUP + WINDOW + 30) + 60 ))

bounded "$LIMIT" "$SELF" "$OUT"
trap cleanup EXIT
trap 'exit 130' INT TERM
ensure_binary

CSV="$OUT/scaling.csv"
echo "gpus,processes_per_gpu,interval,window_s,cpu_s,cpu_pct,samples_per_s,cpu_ms_per_sample,rss_kib,hwm_kib,scrape_ms,scrape_bytes,series" > "$CSV"

for p in "${POINTS[@]}"; do
  gpus=${p%%:*}
  procs=${p##*:}
  cfg="$OUT/sim-${gpus}x${procs}.yaml"
  sim_config "$cfg" processes "$gpus" "$procs" "history: {max_processes: 4096}"
  for iv in "${IVS[@]}"; do
    port=$(free_port)
    start_exporter "$OUT/exporter-${gpus}x${procs}-$iv.log" "$port" "$cfg" "$iv"
    wait_ready "http://127.0.0.1:$port/-/ready"
    sleep "$WARMUP"
    s0=$(curl -sf --max-time 10 "http://127.0.0.1:$port/metrics" | metric_value gpumem_exporter_samples_total)
    c0=$(cpu_seconds "$EXP_PID"); t0=$(now_s)
    sleep "$WINDOW"
    c1=$(cpu_seconds "$EXP_PID"); t1=$(now_s)
    rss=$(rss_kib "$EXP_PID"); hwm=$(hwm_kib "$EXP_PID")
    s1=$(curl -sf --max-time 10 "http://127.0.0.1:$port/metrics" | metric_value gpumem_exporter_samples_total)
    # Scrape cost: median of 3 (text format), size, series.
    times=()
    for _ in 1 2 3; do
      times+=("$(curl -sf --max-time 30 -o "$OUT/.body" -w '%{time_total}' "http://127.0.0.1:$port/metrics")")
    done
    scrape_ms=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p | awk '{printf "%.1f", $1 * 1000}')
    bytes=$(stat -c %s "$OUT/.body")
    series=$(grep -vc '^#' "$OUT/.body" || true)
    stop "$EXP_PID"
    awk -v g="$gpus" -v p="$procs" -v iv="$iv" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" \
        -v s0="$s0" -v s1="$s1" -v rss="$rss" -v hwm="$hwm" -v sm="$scrape_ms" \
        -v b="$bytes" -v n="$series" 'BEGIN {
      w = t1 - t0; cpu = c1 - c0; sps = (s1 - s0) / w
      printf "%d,%d,%s,%.1f,%.2f,%.1f,%.1f,%.3f,%d,%d,%s,%d,%d\n", g, p, iv, w, cpu, 100 * cpu / w, sps, (sps > 0 ? 1000 * cpu / (s1 - s0) : 0), rss, hwm, sm, b, n
    }' >> "$CSV"
    tail -1 "$CSV" >&2
  done
done
rm -f "$OUT/.body"

{
  echo "# scaling $(date -u +%FT%TZ)"
  machine_line
  echo "exporter: $(binary_line), --source sim, scenario processes; ${WARMUP}s warm-up, CPU over ${WINDOW}s without scrapes"
  echo
  printf '%5s %10s %9s %8s %10s %14s %9s %10s %11s %8s\n' GPUs "procs/GPU" interval "CPU %" "samples/s" "CPU ms/sample" "RSS MiB" "scrape ms" "scrape KiB" series
  tail -n +2 "$CSV" | while IFS=, read -r g p iv w cs pct sps cms rss hwm sm b n; do
    printf '%5s %10s %9s %8s %10s %14s %9.1f %10s %11.0f %8s\n' "$g" "$p" "$iv" "$pct" "$sps" "$cms" "$(awk -v r="$rss" 'BEGIN {print r / 1024}')" "$sm" "$(awk -v x="$b" 'BEGIN {print x / 1024}')" "$n"
  done
} | tee "$OUT/summary.txt"
