# Helpers shared by the benchmark scripts (sourced, not run).
# Expects to be sourced from the repository root.

BIN=${GPUMEM_BIN:-target/release/gpumem-exporter}
PIDS_TO_KILL=()

# Build the release binary only when it is missing or older than the sources.
ensure_binary() {
  if [[ -n ${GPUMEM_BIN:-} ]]; then
    [[ -x $BIN ]] || { echo "GPUMEM_BIN=$BIN is not executable" >&2; exit 1; }
    return
  fi
  if [[ ! -x $BIN ]] || [[ -n $(find src Cargo.toml Cargo.lock -newer "$BIN" -print -quit 2>/dev/null) ]]; then
    echo "building $BIN (missing or older than the sources)" >&2
    cargo build --release >&2
  fi
}

# A free loopback TCP port (asks the kernel, then releases it).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Kill every process this script started (exporters, servers, loops), newest first.
cleanup() {
  local i
  for ((i = ${#PIDS_TO_KILL[@]} - 1; i >= 0; i--)); do
    kill "${PIDS_TO_KILL[i]}" 2>/dev/null || true
  done
  sleep 0.3
  for ((i = ${#PIDS_TO_KILL[@]} - 1; i >= 0; i--)); do
    kill -9 "${PIDS_TO_KILL[i]}" 2>/dev/null || true
  done
}

# Remember a pid for cleanup.
track() { PIDS_TO_KILL+=("$1"); }

# Stop one tracked process now.
stop() {
  kill "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
}

# Write a simulator config: sim_config FILE SCENARIO GPUS PROCESSES [extra YAML lines...]
sim_config() {
  local file=$1 scenario=$2 gpus=$3 procs=$4
  shift 4
  {
    echo "sim:"
    echo "  gpus:"
    for _ in $(seq "$gpus"); do
      echo "    - {scenario: $scenario, processes: $procs}"
    done
    for line in "$@"; do echo "$line"; done
  } > "$file"
}

# Start the exporter on the simulator: start_exporter LOG PORT CONFIG INTERVAL [more flags...]
# Sets EXP_PID. The log keeps the first LOG_LINES (2000) lines and the count of all of them: a
# full process table makes the exporter warn on every refused report, gigabytes in a soak.
start_exporter() {
  local log=$1 port=$2 config=$3 interval=$4
  shift 4
  "$BIN" --source sim --config "$config" --sample-interval "$interval" \
    --web.listen-address "127.0.0.1:$port" --ingest.socket= --log.level warn "$@" \
    > >(awk -v max="${LOG_LINES:-2000}" 'NR <= max {print} END {print "(" NR " log lines in all)"}' > "$log") 2>&1 &
  EXP_PID=$!
  track "$EXP_PID"
}

# Wait until a URL answers 200 (at most $2 seconds, default 30).
wait_ready() {
  local url=$1 limit=${2:-30}
  for _ in $(seq $((limit * 10))); do
    curl -sf -o /dev/null --max-time 2 "$url" && return 0
    sleep 0.1
  done
  echo "not ready after ${limit}s: $url" >&2
  return 1
}

# CPU seconds a process has used, all its threads together, those that have exited included,
# to the nanosecond: its CPU-time clock (clock_getcpuclockid). utime+stime in /proc/<pid>/stat
# counts in 10 ms ticks, too coarse for short runs; summing /proc/<pid>/task/*/schedstat misses
# threads that have exited (a threaded HTTP server's request threads, tokio's idle blocking
# threads).
cpu_seconds() {
  python3 - "$1" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
clock, ts = ctypes.c_int(), Timespec()
if libc.clock_getcpuclockid(int(sys.argv[1]), ctypes.byref(clock)) or libc.clock_gettime(clock, ctypes.byref(ts)):
    sys.exit("cannot read the CPU clock of pid " + sys.argv[1])
print(f"{ts.sec + ts.nsec * 1e-9:.6f}")
PY
}

# VmRSS / VmHWM of a process in KiB.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# Value of an unlabelled sample in a /metrics text body on stdin: metric_value NAME
metric_value() { awk -v n="$1" '$1 == n {v = $2} END {print v}'; }

# Monotonic seconds with fractions.
now_s() { awk '{print $1}' /proc/uptime; }

cpu_model() { awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo; }

machine_line() {
  echo "machine: $(nproc) CPUs, $(cpu_model), load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Run the script again under `timeout LIMIT` (once), so that nothing outlives LIMIT seconds:
# bounded LIMIT SCRIPT ARGS...
bounded() {
  local limit=$1
  shift
  if [[ -z ${_GPUMEM_BENCH_BOUNDED:-} ]]; then
    export _GPUMEM_BENCH_BOUNDED=1
    exec timeout -k 15 "$limit" bash "$@"
  fi
}

# The binary by version and content hash (not by path).
binary_line() {
  echo "$("$BIN" --version 2>/dev/null | head -1) (sha256 $(sha256sum "$BIN" | cut -c1-12))"
}
