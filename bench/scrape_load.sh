#!/usr/bin/env bash
# Scrape throughput and latency of /metrics at 8 GPUs × 64 processes (about 14 000 series),
# against a Python prometheus_client exporter serving the same series (bench/python_exporter.py),
# both on loopback, loaded in turn by wrk.
#
#   bash bench/scrape_load.sh OUTDIR
#
# Environment: DURATION (seconds per wrk run, 15), THREADS (2), CONNECTIONS (8),
# GPUMEM_BIN (default target/release/gpumem-exporter, built if missing or stale).
# Writes to OUTDIR: wrk-*.txt (raw wrk output), results.csv, sizes.csv, the two bodies, the
# comparison of their samples, the exporters' logs and the venv with prometheus_client.
# A benchmark, not a test: it prints a table and never fails on a number.
set -euo pipefail
SELF=$(realpath "$0")
OUT=$(realpath -m "${1:?usage: bash bench/scrape_load.sh OUTDIR}")
cd "$(dirname "$SELF")/.."
mkdir -p "$OUT"
source bench/lib.sh
DURATION=${DURATION:-15}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-8}
LIMIT=${LIMIT:-900}   # the whole script, seconds

bounded "$LIMIT" "$SELF" "$OUT"
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_binary
if ! command -v wrk >/dev/null; then
  if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    timeout 300 apt-get install -y wrk >/dev/null || { timeout 300 apt-get update >/dev/null && timeout 300 apt-get install -y wrk >/dev/null; }
  else
    echo "wrk is missing (Debian: apt-get install wrk)" >&2; exit 1
  fi
fi
if [[ ! -x $OUT/venv/bin/python ]] || ! "$OUT/venv/bin/python" -c 'import prometheus_client' 2>/dev/null; then
  timeout 120 python3 -m venv "$OUT/venv"
  timeout 300 "$OUT/venv/bin/pip" install -q --disable-pip-version-check prometheus_client
fi
PROM_CLIENT_VERSION=$("$OUT/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("prometheus_client"))')

sim_config "$OUT/sim-8x64.yaml" processes 8 64
P_OURS=$(free_port)
start_exporter "$OUT/exporter.log" "$P_OURS" "$OUT/sim-8x64.yaml" 1s
OURS=$EXP_PID
wait_ready "http://127.0.0.1:$P_OURS/-/ready"
sleep 3   # a few samples, so every derived series is there

P_PY=$(free_port)
PYTHONUNBUFFERED=1 "$OUT/venv/bin/python" bench/python_exporter.py serve \
  --source "http://127.0.0.1:$P_OURS/metrics" --port "$P_PY" --dump "$OUT/source.txt" \
  > "$OUT/python.log" 2>&1 &
PY=$!
track "$PY"
wait_ready "http://127.0.0.1:$P_PY/metrics" 60

URL_OURS="http://127.0.0.1:$P_OURS/metrics"
URL_PY="http://127.0.0.1:$P_PY/metrics"
OM='Accept: application/openmetrics-text; version=1.0.0; charset=utf-8'

# The same series? (the Python exporter serves what it fetched; compare with that body)
curl -sf --max-time 30 "$URL_PY" > "$OUT/python-body.txt"
curl -sf --max-time 30 "$URL_OURS" > "$OUT/ours-body.txt"
SAME=$("$OUT/venv/bin/python" bench/python_exporter.py compare "$OUT/source.txt" "$OUT/python-body.txt" | tee "$OUT/compare.txt" | head -1)

# Response sizes, bytes, both formats.
size() { curl -s --max-time 30 -o /dev/null -w '%{size_download}' "${@:2}" "$1"; }
echo "target,format,bytes,samples" > "$OUT/sizes.csv"
for t in ours python; do
  url=$URL_OURS; [[ $t == python ]] && url=$URL_PY
  n=$(grep -vc '^#' "$OUT/$t-body.txt")
  echo "$t,text,$(size "$url"),$n" >> "$OUT/sizes.csv"
  echo "$t,openmetrics,$(size "$url" -H "$OM"),$n" >> "$OUT/sizes.csv"
done

# Latency in ms from wrk's "50%   1.23ms" style.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.2f", n }'
}

echo "target,format,threads,connections,seconds,requests,requests_per_s,p50_ms,p99_ms,errors,server_cpu_s,server_cpu_ms_per_request" > "$OUT/results.csv"
# run_wrk TARGET FORMAT THREADS CONNECTIONS
run_wrk() {
  local target=$1 format=$2 threads=$3 conns=$4 url pid hdr=()
  url=$URL_OURS; pid=$OURS
  [[ $target == python ]] && { url=$URL_PY; pid=$PY; }
  [[ $format == openmetrics ]] && hdr=(-H "$OM")
  local raw="$OUT/wrk-$target-$format-c$conns.txt" c0 c1
  c0=$(cpu_seconds "$pid")
  timeout $((DURATION + 60)) wrk -t"$threads" -c"$conns" -d"${DURATION}s" --timeout 10s --latency "${hdr[@]}" "$url" > "$raw" 2>&1 || true
  c1=$(cpu_seconds "$pid")
  local reqs rps p50 p99 errs secs
  reqs=$(awk '/requests in/ {print $1}' "$raw")
  secs=$(awk '/requests in/ {gsub(/s,?/, "", $4); print $4}' "$raw")
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$raw")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$raw")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$raw")")
  errs=$(awk '/Socket errors:/ {gsub(/,/, ""); s = $4 + $6 + $8 + $10} /Non-2xx/ {s += $5} END {print s + 0}' "$raw")
  local cpu_s cpu_req
  cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN {printf "%.3f", b - a}')
  cpu_req=$(awk -v c="$cpu_s" -v r="${reqs:-0}" 'BEGIN {if (r > 0) printf "%.3f", c * 1000 / r; else print ""}')
  echo "$target,$format,$threads,$conns,$secs,$reqs,$rps,$p50,$p99,$errs,$cpu_s,$cpu_req" >> "$OUT/results.csv"
}

# Alternate the targets so that load from other work on the machine hits both alike.
for spec in "text $THREADS $CONNECTIONS" "text 1 1" "openmetrics $THREADS $CONNECTIONS"; do
  set -- $spec
  run_wrk ours "$1" "$2" "$3"
  run_wrk python "$1" "$2" "$3"
done

{
  echo "# scrape_load $(date -u +%FT%TZ)"
  machine_line
  echo "exporter: $(binary_line), --source sim, 8 GPUs x 64 processes (scenario processes), --sample-interval 1s"
  echo "python: prometheus_client $PROM_CLIENT_VERSION, $("$OUT/venv/bin/python" -V 2>&1), start_http_server, custom collector"
  echo "same series: $SAME"
  echo "wrk: ${DURATION}s per run, --latency, loopback"
  echo
  printf '%-8s %-12s %5s %12s %9s %9s %6s %14s\n' target format conns "requests/s" "p50 ms" "p99 ms" errors "CPU ms/request"
  tail -n +2 "$OUT/results.csv" | while IFS=, read -r t f th c s r rps p50 p99 e cpu cpr; do
    printf '%-8s %-12s %5s %12s %9s %9s %6s %14s\n' "$t" "$f" "$c" "$rps" "$p50" "$p99" "$e" "$cpr"
  done
  echo
  awk -F, 'NR > 1 {rps[$1 "," $2 "," $4] = $7}
    END {
      split("text,'"$CONNECTIONS"' text,1 openmetrics,'"$CONNECTIONS"'", ks, " ")
      for (i = 1; i <= 3; i++) {
        k = ks[i]; split(k, p, ",")
        if (rps["python," k] > 0)
          printf "throughput ratio ours/python, %s, %s connection(s): %.1fx\n", p[1], p[2], rps["ours," k] / rps["python," k]
      }
    }' "$OUT/results.csv"
  echo
  printf '%-8s %-12s %10s %8s\n' target format bytes samples
  tail -n +2 "$OUT/sizes.csv" | while IFS=, read -r t f b n; do printf '%-8s %-12s %10s %8s\n' "$t" "$f" "$b" "$n"; done
} | tee "$OUT/summary.txt"
