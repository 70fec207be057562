#!/usr/bin/env bash
# Resident memory of the exporter on the simulator at 8 GPUs × 64 processes, and a soak with
# processes (and allocator reports) that come and go.
#
#   bash bench/footprint.sh OUTDIR
#   GPUS=1 PROCS=8 bash bench/footprint.sh OUTDIR     # the same at 1 GPU × 8 processes
#
# 1. steady: scenario `processes` GPUS×PROCS (8×64) at --sample-interval 1s and 10ms, /metrics
#    scraped every second; VmRSS and VmHWM after WARMUP_SECONDS (60; 0 skips this part). The 1s
#    run goes on for HOLD_SECONDS (600) more, so that the history of these long-lived processes
#    reaches its bound (history.window, 10 min by default); RSS and CPU every 10 s to steady-*.csv.
# 2. soak: scenario `churn` GPUS×PROCS (every process replaced by a new pid every 20 s) at 10ms
#    for SOAK_SECONDS (600), /metrics scraped every second, allocator reports over TCP ingest from
#    INGEST_PIDS (4) fake pids each second, each fake pid replaced every INGEST_LIFETIME (25) s.
#    RSS, HWM and CPU every 10 s to soak.csv. SOAK_SECONDS=0 skips it.
#
# GPUMEM_BIN: the binary (default target/release/gpumem-exporter, built if missing or stale).
# Writes *.csv, the exporters' logs and summary.txt to OUTDIR. A benchmark: it never fails on a
# number.
set -euo pipefail
SELF=$(realpath "$0")
OUT=$(realpath -m "${1:?usage: bash bench/footprint.sh OUTDIR}")
cd "$(dirname "$SELF")/.."
mkdir -p "$OUT"
source bench/lib.sh
WARMUP_SECONDS=${WARMUP_SECONDS:-60}
HOLD_SECONDS=${HOLD_SECONDS:-600}
SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_WARMUP=${SOAK_WARMUP:-60}
INGEST_PIDS=${INGEST_PIDS:-4}
INGEST_LIFETIME=${INGEST_LIFETIME:-25}
GPUS=${GPUS:-8}
PROCS=${PROCS:-64}
SHAPE=${GPUS}x$PROCS
LIMIT=$((WARMUP_SECONDS * 2 + HOLD_SECONDS + SOAK_SECONDS + 300))

bounded "$LIMIT" "$SELF" "$OUT"
trap cleanup EXIT
trap 'exit 130' INT TERM
ensure_binary

# process_series: gpumem_process_used_bytes series (processes NVML lists, as served);
# fake_pid_series: gpumem_process_allocated_bytes series of the fake reporting pids.
CSV_HEADER="t_s,rss_kib,hwm_kib,cpu_s,samples_total,tracked_processes,series,ingest_reports_total,ingest_rejected_total,process_series,fake_pid_series"

# One CSV row for the exporter EXP_PID: row CSV T0 METRICS_FILE
row() {
  local csv=$1 t0=$2 body=$3 t
  t=$(awk -v a="$(now_s)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
  local samples tracked series reports counts
  samples=$(metric_value gpumem_exporter_samples_total < "$body")
  tracked=$(metric_value gpumem_exporter_tracked_processes < "$body")
  reports=$(metric_value gpumem_ingest_reports_total < "$body")
  counts=$(awk '!/^#/ {n++}
    /^gpumem_ingest_rejected_total/ {r += $2}
    /^gpumem_process_used_bytes\{/ {u++}
    /^gpumem_process_allocated_bytes\{/ && /pid="4[0-9][0-9][0-9][0-9][0-9][0-9]"/ {f++}
    END {printf "%d,%d,%d,%d", n, r, u, f}' "$body")
  echo "$t,$(rss_kib "$EXP_PID"),$(hwm_kib "$EXP_PID"),$(cpu_seconds "$EXP_PID"),$samples,$tracked,${counts%%,*},$reports,${counts#*,}" >> "$csv"
}

# Scrape every second for SECONDS, one CSV row every 10 s: observe PORT SECONDS CSV T0
# (T0: when the exporter started; rows are written from the current time on).
observe() {
  local port=$1 secs=$2 csv=$3 t0=$4 start next i=0
  local body="$OUT/.last-scrape" tmp="$OUT/.scrape.tmp"
  start=$(now_s)
  while :; do
    curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" -o "$tmp" && mv "$tmp" "$body" || true
    if ((i % 10 == 0)); then row "$csv" "$t0" "$body"; fi
    ((++i > secs)) && break
    next=$(awk -v s="$start" -v i="$i" -v n="$(now_s)" 'BEGIN {d = s + i - n; printf "%.3f", (d > 0 ? d : 0)}')
    sleep "$next"
  done
}

# Value of COLUMN in the first CSV row at or after time T: at CSV T COLUMN
at() { awk -F, -v t="$2" -v c="$3" 'NR > 1 && $1 >= t {print $c; exit}' "$1"; }
last() { tail -1 "$1" | cut -d, -f"$2"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# CPU % of one core over the last 60 s of rows in CSV (cpu_s is column 4).
cpu_last60() {
  awk -F, 'NR > 1 {t[NR] = $1; c[NR] = $4; n = NR}
    END {for (i = n; i > 2 && t[n] - t[i] < 60; i--); if (i > 1 && t[n] > t[i]) printf "%.1f", 100 * (c[n] - c[i]) / (t[n] - t[i]); else print "-"}' "$1"
}

SUMMARY="$OUT/summary.txt"
{
  echo "# footprint $(date -u +%FT%TZ)"
  machine_line
  echo "exporter: $(binary_line), --source sim"
} > "$SUMMARY"

# 1. steady 8×64 at 1s and 10ms (WARMUP_SECONDS=0 skips it).
sim_config "$OUT/sim-processes-$SHAPE.yaml" processes "$GPUS" "$PROCS"
STEADY_ROWS=()
STEADY_INTERVALS=(1s 10ms)
((WARMUP_SECONDS > 0)) || STEADY_INTERVALS=()
for interval in "${STEADY_INTERVALS[@]}"; do
  csv="$OUT/steady-$interval.csv"
  echo "$CSV_HEADER" > "$csv"
  port=$(free_port)
  t0=$(now_s)
  start_exporter "$OUT/steady-$interval.log" "$port" "$OUT/sim-processes-$SHAPE.yaml" "$interval"
  wait_ready "http://127.0.0.1:$port/-/ready"
  observe "$port" "$WARMUP_SECONDS" "$csv" "$t0"
  rss_w=$(last "$csv" 2); hwm_w=$(last "$csv" 3); cpu_w=$(cpu_last60 "$csv")
  if [[ $interval == 1s && $HOLD_SECONDS -gt 0 ]]; then
    observe "$port" "$HOLD_SECONDS" "$csv" "$t0"
    rss_h=$(last "$csv" 2); hwm_h=$(last "$csv" 3); t_h=$(last "$csv" 1); cpu_h=$(cpu_last60 "$csv")
  fi
  stop "$EXP_PID"
  STEADY_ROWS+=("steady $SHAPE, $interval, after ${WARMUP_SECONDS}s|$(mib "$rss_w")|$(mib "$hwm_w")|$cpu_w")
  if [[ $interval == 1s && $HOLD_SECONDS -gt 0 ]]; then
    STEADY_ROWS+=("steady $SHAPE, $interval, after ${t_h%.*}s|$(mib "$rss_h")|$(mib "$hwm_h")|$cpu_h")
  fi
done

((${#STEADY_ROWS[@]} == 0)) || {
  echo
  echo "## resident memory, $GPUS GPUs x $PROCS processes (scrape every 1 s)"
  printf '%-36s %10s %10s %16s\n' run "VmRSS MiB" "VmHWM MiB" "CPU % (last 60s)"
  for r in "${STEADY_ROWS[@]}"; do IFS='|' read -r a b c d <<< "$r"; printf '%-36s %10s %10s %16s\n' "$a" "$b" "$c" "$d"; done
} | tee -a "$SUMMARY"

# 2. soak: churn at 10ms with scrapes and TCP ingest from fake pids that come and go.
if ((SOAK_SECONDS == 0)); then
  rm -f "$OUT/.last-scrape" "$OUT/.scrape.tmp"
  exit 0
fi
sim_config "$OUT/sim-churn-$SHAPE.yaml" churn "$GPUS" "$PROCS"
csv="$OUT/soak.csv"
echo "$CSV_HEADER" > "$csv"
port=$(free_port)
iport=$(free_port)
t0=$(now_s)
start_exporter "$OUT/soak.log" "$port" "$OUT/sim-churn-$SHAPE.yaml" 10ms --ingest.listen-address "127.0.0.1:$iport"
wait_ready "http://127.0.0.1:$port/-/ready"
mapfile -t UUIDS < <(curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" | grep '^gpumem_gpu_info{' | sed 's/.*uuid="\([^"]*\)".*/\1/')

# The fake reporters: each second, INGEST_PIDS reports; slot s uses pid 4000000 + 1000 s + generation.
ingest_loop() {
  local start i=0 s gen pid uuid alloc body code ok=0 full=0 other=0
  start=$(now_s)
  while :; do
    for ((s = 0; s < INGEST_PIDS; s++)); do
      gen=$(((i + s * INGEST_LIFETIME / INGEST_PIDS) / INGEST_LIFETIME))
      pid=$((4000000 + 1000 * s + gen))
      uuid=${UUIDS[s % ${#UUIDS[@]}]}
      alloc=$(((2048 + (i * 37 + s * 101) % 512) * 1048576))
      body='{"version":1,"identity":{"job":"soak","rank":'$s',"local_rank":'$s',"world_size":'$INGEST_PIDS'},'
      body+='"devices":[{"uuid":"'$uuid'","allocator":"pytorch","allocated_bytes":'$alloc',"reserved_bytes":'$((alloc + 1073741824))','
      body+='"active_bytes":'$alloc',"inactive_split_bytes":67108864,"segments":120,"alloc_retries":0,"ooms":0,'
      body+='"allocated_peak_bytes":'$((3072 * 1048576))',"largest_free_block_bytes":536870912}],'
      body+='"phase":"step'$((i % 3))'","events":[{"kind":"phase","name":"step'$((i % 3))'"}],'
      body+='"components":[{"component":"attention","parameters_bytes":1000000,"gradients_bytes":1000000,"optimizer_bytes":2000000}]}'
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST -H 'Content-Type: application/json' \
        -H "X-Gpumem-Pid: $pid" --data "$body" "http://127.0.0.1:$iport/api/v1/report" || true)
      case $code in
        202) ok=$((ok + 1)) ;;
        429) full=$((full + 1)) ;;
        *) other=$((other + 1)) ;;
      esac
    done
    echo "$ok $full $other" > "$OUT/ingest-counts.txt"
    i=$((i + 1))
    sleep "$(awk -v s="$start" -v i="$i" -v n="$(now_s)" 'BEGIN {d = s + i - n; printf "%.3f", (d > 0 ? d : 0)}')"
  done
}
ingest_loop &
INGEST=$!
track "$INGEST"
observe "$port" "$SOAK_SECONDS" "$csv" "$t0"
kill "$INGEST" 2>/dev/null || true
grep -E '^gpumem_(ingest|exporter)_' "$OUT/.last-scrape" > "$OUT/soak-exporter-counters.txt" || true
stop "$EXP_PID"
read -r ING_OK ING_FULL ING_OTHER < "$OUT/ingest-counts.txt"

{
  echo
  echo "## soak: churn $GPUS GPUs x $PROCS processes, 10ms, ${SOAK_SECONDS}s, scrape every 1 s, TCP ingest from $INGEST_PIDS fake pids (new pid every ${INGEST_LIFETIME}s)"
  awk -F, -v w="$SOAK_WARMUP" -v all="$((GPUS * PROCS))" '
    NR == 1 {next}
    {t[NR] = $1; rss[NR] = $2; hwm = $3; cpu[NR] = $4; smp[NR] = $5; n = NR}
    wi == 0 && $1 >= w {wi = NR}
    wi > 0 && $2 > maxw {maxw = $2}
    $2 > maxall {maxall = $2}
    $6 > trk {trk = $6}
    wi > 0 && (pmin == "" || $10 < pmin) {pmin = $10}
    wi > 0 && $10 > pmax {pmax = $10}
    wi > 0 && $11 > fmax {fmax = $11}
    END {
      f = 2
      printf "RSS after %ds warm-up (t=%.0fs): %.1f MiB\n", w, t[wi], rss[wi] / 1024
      printf "RSS at the end (t=%.0fs):        %.1f MiB\n", t[n], rss[n] / 1024
      printf "RSS max after warm-up:          %.1f MiB (max over the run %.1f MiB, VmHWM %.1f MiB)\n", maxw / 1024, maxall / 1024, hwm / 1024
      printf "growth after warm-up: end %+.2f MiB, max %+.2f MiB\n", (rss[n] - rss[wi]) / 1024, (maxw - rss[wi]) / 1024
      printf "CPU: %.1f s over %.0f s = %.1f%% of one core on average (after warm-up: %.1f%%)\n", cpu[n] - cpu[f], t[n] - t[f], 100 * (cpu[n] - cpu[f]) / (t[n] - t[f]), 100 * (cpu[n] - cpu[wi]) / (t[n] - t[wi])
      printf "samples: %.1f per second achieved (10ms asks for 100); tracked processes at most %d\n", (smp[n] - smp[f]) / (t[n] - t[f]), trk
      printf "live processes served (gpumem_process_used_bytes series, of %d) after warm-up: %d..%d; fake pids served at most %d\n", all, pmin, pmax, fmax
    }' "$csv"
  echo "ingest reports: $ING_OK accepted (202), $ING_FULL refused with 429 (history.max_processes reached), $ING_OTHER other"
} | tee -a "$SUMMARY"
rm -f "$OUT/.last-scrape" "$OUT/.scrape.tmp"
