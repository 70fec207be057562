#!/usr/bin/env bash
# The recorder on real GPUs (two or more), one session:
#   a  a healthy DDP job on two GPUs under torchrun, stopped with SIGTERM (as timeout, Slurm and
#      Kubernetes stop jobs): a trace per rank and GPU, the job's status, nothing left running;
#   b  a real training job recorded from NVML alone (python -I), the recorder killed with
#      SIGKILL: the trace replays, the job is stopped;
#   c  a DDP job on two GPUs that runs one rank out of memory, watched live by the exporter, a
#      real Prometheus and a real Alertmanager: the replay's verdict against the live pages;
#   d  a single-GPU batch-size warm-up to a real OOM, watched live the same way.
#
#   cargo build --release; (mkdir -p .live && cd .live && apt-get download prometheus prometheus-alertmanager)
#   bash bench/recorder/device.sh OUTDIR [RUN...]     # runs a b c d by default
#
# Needs python3 with torch and transformers, torchrun, nvidia-smi; nothing from the network.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?outdir}
shift
RUNS=" ${*:-a b c d} "
want() { [[ $RUNS == *" $1 "* ]]; }
mkdir -p "$OUT"/{a,b,c,d}
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
BIN=${BIN:-target/release/gpumem-exporter}
REC="python3 -m gpumem_client record --interval 0.5"
nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv >"$OUT/gpus.csv" 2>&1
say() { echo "== $* ($(date +%s))" | tee -a "$OUT/session.txt"; }
left() {
  # What is still running or holding GPU memory after a run.
  {
    echo "-- processes: $(pgrep -af "$1" | grep -v pgrep || true)"
    echo "-- nvidia-smi compute apps:"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  } >"$2" 2>&1
}
verdict() {
  local d=$1
  shift
  "$BIN" replay "$@" --summary "$d/summary.json" --chart "$d/chart.png" >"$d/verdict.txt" 2>"$d/replay.err"
  echo "replay exit $?" >>"$d/verdict.txt"
}

if want a; then
say "a: healthy DDP on 2 GPUs, SIGTERM after 40 s"
timeout -s TERM 40 $REC -o "$OUT/a/run.jsonl" --grace 20 --scenario ddp-sigterm --truth healthy -- \
  torchrun --nproc-per-node 2 bench/recorder/ddp.py --duration 600 >"$OUT/a/log" 2>&1
echo "recorder exit $?" >>"$OUT/a/log"
sleep 3
left ddp.py "$OUT/a/left.txt"
verdict "$OUT/a" "$OUT"/a/run*.jsonl
fi

if want b; then
say "b: NVML-only training job, recorder SIGKILLed after 30 s"
$REC -o "$OUT/b/run.jsonl" --grace 5 --scenario nvml-only-sigkill --truth healthy -- \
  python3 -I bench/crashes/workloads.py healthy-steady --duration 600 --batch 4 >"$OUT/b/log" 2>&1 &
rec=$!
sleep 30
kill -9 "$rec"
sleep 10
left workloads.py "$OUT/b/left.txt"
verdict "$OUT/b" "$OUT/b/run.jsonl"
fi

if [ -d "${DEBS:-.live}" ]; then
  source bench/live/stack.sh
  SCRAPE=5s live_stack "$OUT" || exit 1
  trap 'live_collect "$OUT"; kill "${LIVE_PIDS[@]}" 2>/dev/null' EXIT
  sleep 5
fi

# crash RUN SECONDS SCENARIO PATTERN -- JOB...: a job run to its OOM under the recorder, watched
# live; what is left of it (processes matching PATTERN), and the replay's verdict.
crash() {
  local run=$1 seconds=$2 scenario=$3 pattern=$4
  shift 5
  timeout -s TERM "$seconds" $REC -o "$OUT/$run/run.jsonl" --grace 20 --scenario "$scenario" -- \
    "$@" >"$OUT/$run/log" 2>&1
  echo "recorder exit $?" >>"$OUT/$run/log"
  sleep 20
  left "$pattern" "$OUT/$run/left.txt"
  verdict "$OUT/$run" "$OUT/$run"/run*.jsonl
}

if want c; then
say "c: DDP on 2 GPUs until one rank runs out of memory, watched live"
crash c 200 ddp-oom ddp.py -- \
  torchrun --nproc-per-node 2 bench/recorder/ddp.py --grow --stage-s 20 --stages 3
fi

if want d; then
say "d: batch-size warm-up on one GPU until OOM, watched live"
crash d 220 batch-warmup workloads.py -- \
  python3 bench/crashes/workloads.py batch-warmup --growth-s 100 --stage-s 20
fi
say "end"
python3 bench/recorder/compare.py "$OUT" | tee "$OUT/compare.txt"
