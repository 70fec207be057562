#!/usr/bin/env bash
# Record real out-of-memory crashes and healthy runs on a GPU node, one run at a time, with the
# Python client's recorder (clients/python: python -m gpumem_client record).
#
#   bash bench/crashes/record.sh SET OUTDIR        # SET: dev1 dev2 healthy holdout smoke
#
# Each run writes OUTDIR/<name>.jsonl (and <name>-<pid>.jsonl for a second traced process) and
# OUTDIR/<name>.log. A run is stopped after its time limit; a crash run that did not crash is
# reported, never relabelled. Needs python3 with torch, transformers and torchvision.
set -uo pipefail
cd "$(dirname "$0")/../.."
SET=${1:?set}
OUT=${2:?outdir}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
W="python3 bench/crashes/workloads.py"
INTERVAL=${INTERVAL:-0.5}

rec() { # name limit_s truth command...
  local name=$1 limit=$2 truth=$3; shift 3
  echo "== $name ($(date +%T))"
  timeout -s INT "$limit" python3 -m gpumem_client record -o "$OUT/$name.jsonl" --interval "$INTERVAL" \
    --scenario "$name" ${truth:+--truth $truth} -- "$@" >"$OUT/$name.log" 2>&1
  echo "   exit $? ($(date +%T)); $(grep -h 'gpumem record:' "$OUT/$name.log" | tr '\n' ' ')"
  # Nothing of this run may stay on the GPU for the next.
  pkill -f bench/crashes/workloads.py 2>/dev/null; sleep 2
}

case "$SET" in
smoke)
  for m in kept-logits kept-views hook-capture curriculum frag kv-cache; do
    rec "smoke-$m" 40 "" $W $m --growth-s 5 --stage-s 3 --room-gib 1 --period-s 0.05
  done
  rec smoke-healthy 40 healthy $W healthy-load-ramp --load-gib 2 --load-s 4 --duration 5
  ;;
dev1)
  rec kept-logits 330 "" $W kept-logits --growth-s 150
  rec curriculum 330 "" $W curriculum --growth-s 150 --stage-s 20
  rec hook-capture 300 "" $W hook-capture --growth-s 120 --every 8
  ;;
dev2)
  rec kept-views 300 "" $W kept-views --growth-s 120 --every 10
  rec frag 330 "" $W frag --room-gib 10 --growth-s 180
  # The victim empties its cache every 8 s; the greedy neighbour (no client, NVML only) takes
  # 64 MiB/s and keeps trying after its own failures.
  rec victim-not-grower 330 "" bash -c "$W victim --empty-s 8 & sleep 25; GPUMEM_RECORD_SKIP=1 $W grower --greedy --leave-gib 16 --chunk-mib 32 --period-s 0.5 & wait -n; kill %1 %2 2>/dev/null; wait; exit 1"
  ;;
healthy)
  rec healthy-shared 130 healthy bash -c "$W healthy-load-ramp --load-gib 30 --load-s 40 --duration 60 & $W healthy-train-eval --duration 95 & $W healthy-empty-cache --duration 95 & wait"
  rec healthy-prealloc 90 healthy $W healthy-prealloc --duration 60
  rec healthy-beside-idle 100 healthy bash -c "GPUMEM_RECORD_SKIP=1 $W idle --start-gib 50 --duration 80 & sleep 8; $W healthy-steady --duration 65; wait"
  ;;
holdout)
  rec slow-kept-logits 560 "" $W kept-logits --growth-s 330
  # The grower has no client (its OOM event only is recorded); a healthy ResNet-50 beside it.
  rec leak-beside-resnet 330 "" bash -c "$W healthy-resnet --duration 400 & sleep 20; GPUMEM_RECORD_SKIP=stats $W kept-logits --growth-s 150; kill %1; wait; exit 1"
  rec frag-expandable 330 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W frag --room-gib 10 --growth-s 180
  rec kv-cache 300 "" $W kv-cache --growth-s 150 --period-s 0.05
  rec healthy-train-eval 100 healthy $W healthy-train-eval --duration 75
  ;;
*) echo "unknown set $SET" >&2; exit 2 ;;
esac
