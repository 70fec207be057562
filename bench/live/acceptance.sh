#!/usr/bin/env bash
# The forecast's acceptance run on a node of two GPUs, watched live by the exporter (NVML every
# 1 s, allocator reports every 1 s), a real Prometheus with alerts/ (scrape and evaluation every
# SCRAPE, default 15s) and a real Alertmanager with the route of alerts/README.md, every
# notification timestamped by a webhook (bench/live/stack.sh). Every job is recorded with the
# Python client's recorder, so the runs can be replayed and join the held-out corpus.
#
#   GPU 0, healthy: eight jobs side by side (dynamic padding, bursty inference, torch.compile,
#     GPU-staged checkpoints, train/eval, empty_cache, cuDNN autotuning, gradient
#     accumulation), then a reinforcement-learning loop alone, then a tight evaluation alone.
#   GPU 1, crashes one after another: a KV cache never evicted, hook capture with
#     expandable_segments:True, a batch-size warm-up.
#
#   cargo build --release; (mkdir -p .live && cd .live && apt-get download prometheus prometheus-alertmanager)
#   DEBS=.live bash bench/live/acceptance.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?outdir}
mkdir -p "$OUT"
export SCRAPE=${SCRAPE:-15s} INTERVAL=${INTERVAL:-0.5}
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
W="python3 bench/crashes/workloads.py"
source bench/live/stack.sh
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
live_stack "$OUT" || exit 1
pids+=("${LIVE_PIDS[@]}")
sleep 5
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv >"$OUT/gpu.csv" 2>&1
# rec GPU NAME LIMIT_S TRUTH COMMAND...: one recorded run on one GPU into OUT/NAME/.
rec() {
  local gpu=$1 name=$2 limit=$3 truth=$4
  shift 4
  mkdir -p "$OUT/$name"
  echo "== $name gpu $gpu start $(date +%s.%N)" >>"$OUT/runs.txt"
  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$gpu timeout -s INT -k 20 "$limit" \
    python3 -m gpumem_client record -o "$OUT/$name/$name.jsonl" --interval "$INTERVAL" \
    --gpu "$gpu" --scenario "$name" ${truth:+--truth $truth} -- "$@" >"$OUT/$name/run.log" 2>&1
  echo "   $name end $(date +%s.%N) exit $?" >>"$OUT/runs.txt"
}
D=${D:-110}
(
  for job in "live-h-dynpad|healthy-dynpad --batch 4 --seed 4" "live-h-infer|healthy-infer-bursty --seed 4" \
    "live-h-compile|healthy-compile --batch 4" "live-h-ckpt|healthy-ckpt --batch 4 --ckpt-s 40" \
    "live-h-train-eval|healthy-train-eval" "live-h-empty-cache|healthy-empty-cache --seed 4" \
    "live-h-cudnn|healthy-cudnn --batch 32 --seed 4" "live-h-gradaccum|healthy-long --batch 2 --accum 8"; do
    rec 0 "${job%%|*}" $((D + 40)) healthy $W ${job#*|} --duration $D &
  done
  wait
  rec 0 live-h-rl 150 healthy $W healthy-rl --duration 110 --gen-s 25 --train-s 25 --fraction 0.6 --empty
  rec 0 live-h-tight-eval 120 healthy $W healthy-tight-eval --duration 80 --batch 8 --train-s 30 --eval-s 8
) &
pids+=($!)
(
  rec 1 live-c-kv-cache 150 "" $W kv-cache --growth-s 90 --period-s 0.05
  rec 1 live-c-expandable 120 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W hook-capture --growth-s 60 --every 8
  rec 1 live-c-batch-warmup 150 "" $W batch-warmup --growth-s 100 --stage-s 25
) &
pids+=($!)
wait "${pids[@]: -2}"
sleep 20
live_collect "$OUT"
curl -s 127.0.0.1:10049/metrics | grep -E '^gpumem_(oom_events|forecast_|oom_event_)' >"$OUT/score.txt" || true
echo "done $(($(date +%s) - T0)) s" >>"$OUT/runs.txt"
