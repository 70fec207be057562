#!/usr/bin/env bash
# A whole recording session on one GPU node, watched live: healthy runs side by side, then runs
# that end in a real torch.OutOfMemoryError one at a time, every run recorded with the Python
# client's recorder (one folder per run, one trace per process) while the exporter, a real
# Prometheus and a real Alertmanager watch the GPU (bench/live/stack.sh).
#
#   cargo build --release; (mkdir -p .live && cd .live && apt-get download prometheus prometheus-alertmanager)
#   bash bench/crashes/session.sh PLAN OUTDIR   # PLAN: healthy-and-crashes, healthy-rest,
#                                                 staircase-and-cache, expandable-and-staircase, slow-leak, long,
#                                                 precision-a, precision-b, new-healthy, new-crashes, reearned,
#                                                 reearned-x4, reearned-final, reearned-fifth,
#                                                 reearned-sixth, reearned-seventh, reearned-eighth (four GPUs),
#                                                 reearned-eighth-check, reearned-ninth (two GPUs),
#                                                 reearned-tenth, reearned-eleventh, reearned-twelfth,
#                                                 reearned-thirteenth, reearned-fourteenth,
#                                                 reearned-fifteenth, reearned-sixteenth,
#                                                 reearned-seventeenth .. reearned-thirty-ninth
#                                                 (four GPUs), reearned-fortieth .. reearned-forty-ninth (one GPU)
#   PLAN_ONLY=1 bash bench/crashes/session.sh PLAN OUTDIR   # no GPU: each run's time limit and
#                                                 command (and the schedule of the jobs that print
#                                                 one: workloads.py --dry-run), nothing run
#
# reearned (issue 37): six shapes the corpus lacked, one after another on one H100 80GB, each
# alone, in about 22 minutes (BUDGET_S caps the plan at 1390 s; a run is cut to what is left):
#   h-slow-load        weights read shard by shard from slow storage for ~2 min, then serving (~205 s)
#   h-warmup-saturate  a cache that fills ever more slowly under varying batches, to ~96 %, then flat (~220 s)
#   h-ckpt-gather      a model at 55 % whose checkpoint gathers 12 % of the card every 40 s (~225 s)
#   c-rising-peaks     RL rounds, every rollout longer, until round 7's does not fit (~210 s)
#   c-eval-kept        evaluations whose predictions stay on the GPU, 6 fit, the 7th runs out (~230 s)
#   c-multi-leak       three trials of a sweep leaking together on the GPU (~175 s)
# Watched by two exporters (NVML_ONLY_PORT, default 10050 for this plan: the second one takes no
# allocator reports) at a 15 s scrape (SCRAPE); bench/live/summary.py writes OUTDIR/pages.txt,
# the pages and warnings of each run and exporter. bench/crashes/README.md has the commands.
#
# GPU=N before `rec` runs that job on GPU N alone (CUDA and the recorder), for plans that use
# several GPUs side by side. BUDGET_S=S: no run goes past S seconds after the plan's start.
#
# Healthy runs that share the GPU are separate runs: each is its own recording, and in its
# replay the others are neighbours NVML lists and that send no reports. A run is stopped after
# its time limit; a crash run that did not crash is reported, never relabelled.
# Needs python3 with torch, transformers and torchvision; nothing from the network.
set -uo pipefail
cd "$(dirname "$0")/../.."
PLAN=${1:?plan}
OUT=${2:?outdir}
mkdir -p "$OUT"
INTERVAL=${INTERVAL:-0.5}
export PYTHONPATH="$PWD/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
W="python3 bench/crashes/workloads.py"
T0=$(date +%s)

PLAN_ONLY=${PLAN_ONLY:-}
# Each plan's own settings, unless the caller set them: the issue 37 plans are watched at a
# 15 s scrape by two exporters, and each has a budget of its own.
case "$PLAN" in
reearned*)
  SCRAPE=${SCRAPE:-15s}
  NVML_ONLY_PORT=${NVML_ONLY_PORT-10050}
  ;;
esac
case "$PLAN" in
reearned) BUDGET_S=${BUDGET_S:-1390} ;;
reearned-x4) BUDGET_S=${BUDGET_S:-840} ;;
reearned-final) BUDGET_S=${BUDGET_S:-560} ;;
reearned-fifth) BUDGET_S=${BUDGET_S:-520} ;;
reearned-sixth) BUDGET_S=${BUDGET_S:-$([ "${GPUS:-4}" -lt 4 ] && echo 1080 || echo 540)} ;;
reearned-seventh) BUDGET_S=${BUDGET_S:-$([ "${GPUS:-4}" -lt 4 ] && echo 1040 || echo 520)} ;;
reearned-eighth) BUDGET_S=${BUDGET_S:-$([ "${GPUS:-4}" -lt 4 ] && echo 960 || echo 480)} ;;
reearned-eighth-check) BUDGET_S=${BUDGET_S:-330} ;;
reearned-ninth) BUDGET_S=${BUDGET_S:-480} ;;
reearned-tenth) BUDGET_S=${BUDGET_S:-790} ;;
reearned-eleventh) BUDGET_S=${BUDGET_S:-420} ;;
reearned-twelfth | reearned-thirteenth | reearned-fourteenth | reearned-fifteenth | reearned-sixteenth | reearned-seventeenth) BUDGET_S=${BUDGET_S:-270} ;;
reearned-eighteenth | reearned-nineteenth | reearned-twentieth) BUDGET_S=${BUDGET_S:-290} ;;
reearned-twenty-first) BUDGET_S=${BUDGET_S:-440} ;;
reearned-twenty-second | reearned-twenty-third | reearned-twenty-fourth | reearned-twenty-fifth) BUDGET_S=${BUDGET_S:-300} ;;
reearned-twenty-sixth) BUDGET_S=${BUDGET_S:-$([ "${GPUS:-2}" -lt 2 ] && echo 600 || echo 330)} ;;
reearned-twenty-seventh | reearned-twenty-eighth) BUDGET_S=${BUDGET_S:-330} ;;
reearned-twenty-ninth | reearned-thirtieth | reearned-thirty-first) BUDGET_S=${BUDGET_S:-260} ;;
reearned-thirty-second | reearned-thirty-third | reearned-thirty-fourth | reearned-thirty-fifth) BUDGET_S=${BUDGET_S:-280} ;;
reearned-thirty-sixth | reearned-thirty-seventh | reearned-thirty-eighth | reearned-thirty-ninth) BUDGET_S=${BUDGET_S:-290} ;;
reearned-fortieth) BUDGET_S=${BUDGET_S:-540} ;;
reearned-forty-first) BUDGET_S=${BUDGET_S:-560} ;;
reearned-forty-second) BUDGET_S=${BUDGET_S:-1100} ;;
reearned-forty-third) BUDGET_S=${BUDGET_S:-560} ;;
reearned-forty-fourth) BUDGET_S=${BUDGET_S:-800} ;;
reearned-forty-fifth) BUDGET_S=${BUDGET_S:-840} ;;
reearned-forty-sixth) BUDGET_S=${BUDGET_S:-620} ;;
reearned-forty-seventh) BUDGET_S=${BUDGET_S:-960} ;;
reearned-forty-eighth) BUDGET_S=${BUDGET_S:-1000} ;;
reearned-forty-ninth) BUDGET_S=${BUDGET_S:-720} ;;
reearned-check) BUDGET_S=${BUDGET_S:-230} ;;
esac
BUDGET_S=${BUDGET_S:-}
PLANNED=0 # PLAN_ONLY: the seconds the plan would take were every run to reach its limit

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
if [ -z "$PLAN_ONLY" ] && [ -d "${DEBS:-.live}" ]; then
  source bench/live/stack.sh
  live_stack "$OUT" || exit 1
  pids+=("${LIVE_PIDS[@]}")
  sleep 5
fi
[ -n "$PLAN_ONLY" ] || nvidia-smi --query-gpu=name,uuid,memory.total,memory.used --format=csv >"$OUT/gpu.csv" 2>&1
# Seconds since the plan started (PLAN_ONLY: as if every run so far had reached its limit).
elapsed() {
  if [ -n "$PLAN_ONLY" ]; then echo "$PLANNED"; else echo $(($(date +%s) - T0)); fi
}

# rec NAME LIMIT_S TRUTH COMMAND...: one recorded run into OUT/NAME/ (and a line of
# OUT/runs.tsv: name, start and end as Unix times, exit status).
rec() {
  local name=$1 limit=$2 truth=$3
  shift 3
  if [ -n "$BUDGET_S" ]; then
    # After its limit a run has 30 s to stop (timeout -k 30): the recorder passes the signal
    # to the job, waits its grace, finishes the traces.
    local left=$((BUDGET_S - $(elapsed) - 30))
    if [ "$left" -lt 60 ]; then
      echo "== $name skipped at $(elapsed) s: $left s of the plan's $BUDGET_S s left" | tee -a "$OUT/runs.txt"
      return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  if [ -n "$PLAN_ONLY" ]; then
    echo "== $name at $(elapsed) s, limit $limit s, truth ${truth:-oom expected}: $*" | tee -a "$OUT/runs.txt"
    PLANNED=$((PLANNED + limit + 30))
    if [ "$1 $2" = "python3 bench/crashes/workloads.py" ]; then
      "$@" --dry-run | sed 's/^/   /' || true
    fi
    return
  fi
  mkdir -p "$OUT/$name"
  local start
  start=$(date +%s.%N)
  echo "== $name start $(($(date +%s) - T0)) s" | tee -a "$OUT/runs.txt"
  env CUDA_DEVICE_ORDER=PCI_BUS_ID ${GPU:+CUDA_VISIBLE_DEVICES=$GPU} \
    timeout -s INT -k 30 "$limit" python3 -m gpumem_client record -o "$OUT/$name/$name.jsonl" \
    --interval "$INTERVAL" --scenario "$name" ${GPU:+--gpu $GPU} ${truth:+--truth $truth} -- "$@" >"$OUT/$name/run.log" 2>&1
  local code=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s.%N)" "$code" "${GPU:-}" >>"$OUT/runs.tsv"
  echo "   $name end $(($(date +%s) - T0)) s exit $code; $(grep -h 'gpumem record:' "$OUT/$name/run.log" | tr '\n' ' ')" | tee -a "$OUT/runs.txt"
}
# Wait until S seconds after the session started.
at() {
  [ -n "$PLAN_ONLY" ] && return 0
  local left=$(($1 - ($(date +%s) - T0)))
  [ "$left" -gt 0 ] && sleep "$left"
  return 0
}
# A pause of S seconds between runs (PLAN_ONLY: counted, not slept).
# side_by_side LANE...: runs each lane (a function of runs one after another) beside the
# others, and waits for all (PLAN_ONLY: one after another, each lane's schedule from 0 s).
side_by_side() {
  local lane slots=()
  if [ -n "$PLAN_ONLY" ]; then
    for lane in "$@"; do PLANNED=0; $lane; done
    return
  fi
  for lane in "$@"; do
    $lane &
    slots+=($!)
  done
  wait "${slots[@]}"
}

# The lanes of a four-GPU plan (lane0 to lane3) side by side; on a node of two GPUs (GPUS=2),
# lanes 2 and 3 on GPUs 0 and 1 after lanes 0 and 1: they run on GPU $G2 and $G3.
G2=2 G3=3
[ "${GPUS:-4}" -lt 4 ] && G2=0 G3=1
four_lanes() {
  if [ "$G2" = 2 ]; then
    side_by_side lane0 lane1 lane2 lane3
  else
    side_by_side lane0 lane1
    pause 20
    side_by_side lane2 lane3
  fi
}

# trials N GROWTH_S EVERY SEED0: the command of N sweep trials started together on one GPU, each
# keeping logits every EVERY steps (an expression of k, the trial's index, may stand for it);
# when the first ends (its out-of-memory error), the others are stopped 15 s later.
trials() {
  echo "at=\$((\$(date +%s) + 30)); for k in \$(seq 0 $(($1 - 1))); do $W sweep-trial --trial \$k --trials $1 --sync-at \$at --growth-s $2 --every $3 --seed \$((k + $4)) & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
}

# quiet_trials N DURATION SEED0: the command of N sweep trials that keep nothing (a healthy
# sweep), taking the card but 3 GiB, each training DURATION seconds (an expression of k may
# stand for it), then ending.
quiet_trials() {
  echo "at=\$((\$(date +%s) + 30)); for k in \$(seq 0 $(($1 - 1))); do $W sweep-trial --trial \$k --trials $1 --sync-at \$at --every 0 --leave-gib 3 --duration $2 --seed \$((k + $3)) & done; wait"
}

pause() {
  if [ -n "$PLAN_ONLY" ]; then PLANNED=$((PLANNED + $1)); else sleep "$1"; fi
}
# four_runs: the plan's functions run1 .. run4 side by side, one GPU each (GPU=0 .. 3). GPUS=2
# runs run1 and run2 on GPUs 0 and 1, and GPUS=2 HALF=2 run3 and run4 on them.
four_runs() {
  local slots=() g
  if [ "${HALF:-1}" = 1 ]; then
    GPU=0 run1 &
    slots+=($!)
    GPU=1 run2 &
    slots+=($!)
  fi
  if [ "${GPUS:-4}" -ge 4 ] || [ "${HALF:-1}" = 2 ]; then
    g=$([ "${GPUS:-4}" -ge 4 ] && echo 2 || echo 0)
    GPU=$g run3 &
    slots+=($!)
    GPU=$((g + 1)) run4 &
    slots+=($!)
  fi
  wait "${slots[@]}"
}

# No client and no recording from inside: a neighbour NVML alone sees.
nvml_only="env -u GPUMEM_SOCKET GPUMEM_RECORD_SKIP=1"

case "$PLAN" in
healthy-and-crashes)
  # Healthy side by side: seven slots, two runs each, and one long run; about 50 GiB in all.
  D=330
  slots=()
  L=$((D + 90))
  rec h-long 1060 healthy $W healthy-long --duration 900 --batch 4 --accum 4 --ckpt-s 150 &
  slots+=($!)
  (rec h-dynpad-1 $L healthy $W healthy-dynpad --duration $D --batch 4 --seed 1
   rec h-dynpad-2 $L healthy $W healthy-dynpad --duration $D --batch 4 --seed 2) &
  slots+=($!)
  (rec h-infer-1 $L healthy $W healthy-infer-bursty --duration $D --seed 1
   rec h-infer-2 $L healthy $W healthy-infer-bursty --duration $D --seed 2) &
  slots+=($!)
  # A neighbour that arrives, leaves and arrives again: with its own client, then without.
  (rec h-neighbour-client $L healthy bash -c "$W healthy-steady --duration $D --batch 4 & sleep 40; $W healthy-resnet --duration 90 --batch 32; sleep 50; $W healthy-resnet --duration 80 --batch 32; wait"
   rec h-neighbour-nvml $L healthy bash -c "$W healthy-steady --duration $D --batch 4 & sleep 30; $nvml_only $W healthy-resnet --duration 100 --batch 32; sleep 40; $nvml_only $W healthy-resnet --duration 90 --batch 32; wait") &
  slots+=($!)
  (rec h-compile $L healthy $W healthy-compile --duration $D --batch 4
   rec h-cudnn $L healthy $W healthy-cudnn --duration $D --batch 32 --seed 2) &
  slots+=($!)
  (rec h-ckpt $L healthy $W healthy-ckpt --duration $D --batch 4 --ckpt-s 45
   rec h-gradaccum $L healthy $W healthy-long --duration $D --batch 2 --accum 8) &
  slots+=($!)
  (rec h-train-eval $L healthy $W healthy-train-eval --duration $D
   rec h-empty-cache $L healthy $W healthy-empty-cache --duration $D --seed 2) &
  slots+=($!)
  # Evaluation close to the limit, beside the long run alone (its footprint is steady).
  (at $((2 * D + 60)); rec h-tight-eval 300 healthy $W healthy-tight-eval --duration 170 --batch 8 --train-s 35 --eval-s 8) &
  slots+=($!)
  wait "${slots[@]}"
  # Crashes, one at a time, each alone on the GPU.
  rec c-batch-warmup 420 "" $W batch-warmup --growth-s 150 --stage-s 30
  rec c-kv-cache 360 "" $W kv-cache --growth-s 150 --period-s 0.05
  rec c-expandable 360 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W hook-capture --growth-s 150 --every 8
  ;;
healthy-rest)
  # The second round of healthy-and-crashes and its long runs, then two crashes: for a session
  # that lost its second half.
  D=330
  L=$((D + 90))
  slots=()
  rec h-long 1060 healthy $W healthy-long --duration 900 --batch 4 --accum 4 --ckpt-s 150 &
  slots+=($!)
  rec h-dynpad-2 $L healthy $W healthy-dynpad --duration $D --batch 4 --seed 2 &
  slots+=($!)
  rec h-infer-2 $L healthy $W healthy-infer-bursty --duration $D --seed 2 &
  slots+=($!)
  rec h-neighbour-nvml $L healthy bash -c "$W healthy-steady --duration $D --batch 4 & sleep 30; $nvml_only $W healthy-resnet --duration 100 --batch 32; sleep 40; $nvml_only $W healthy-resnet --duration 90 --batch 32; wait" &
  slots+=($!)
  rec h-cudnn $L healthy $W healthy-cudnn --duration $D --batch 32 --seed 2 &
  slots+=($!)
  rec h-gradaccum $L healthy $W healthy-long --duration $D --batch 2 --accum 8 &
  slots+=($!)
  rec h-empty-cache $L healthy $W healthy-empty-cache --duration $D --seed 2 &
  slots+=($!)
  (at $((D + 60)); rec h-tight-eval 300 healthy $W healthy-tight-eval --duration 170 --batch 8 --train-s 35 --eval-s 8) &
  slots+=($!)
  wait "${slots[@]}"
  rec c-batch-warmup 420 "" $W batch-warmup --growth-s 150 --stage-s 30
  rec c-kv-cache 360 "" $W kv-cache --growth-s 150 --period-s 0.05
  ;;
staircase-and-cache)
  rec c-batch-warmup 300 "" $W batch-warmup --growth-s 150 --stage-s 30
  rec c-kv-cache 260 "" $W kv-cache --growth-s 150 --period-s 0.05
  ;;
expandable-and-staircase)
  rec c-expandable 280 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W hook-capture --growth-s 150 --every 8
  rec c-batch-warmup-2 280 "" $W batch-warmup --growth-s 160 --stage-s 40 --batch-step 2
  ;;
slow-leak)
  # About eleven minutes of growth after a healthy start.
  rec c-slow-leak 900 "" $W kept-logits --growth-s 660 --every 4 --delay-s 30
  ;;
long)
  rec h-long 1000 healthy $W healthy-long --duration 900 --batch 4 --accum 4 --ckpt-s 150 &
  slots=($!)
  (at 400; rec h-tight-eval 300 healthy $W healthy-tight-eval --duration 170 --batch 8 --train-s 35 --eval-s 8) &
  slots+=($!)
  wait "${slots[@]}"
  ;;
precision-a)
  # Ten healthy runs side by side for D seconds (about 60 GiB in all), then a batch-size
  # warm-up staircase alone: for a lease that allows one ten-minute command.
  D=${D:-320}
  L=$((D + 60))
  slots=()
  for job in \
    "h-dynpad-1|$W healthy-dynpad --duration $D --batch 4 --seed 1" \
    "h-infer-1|$W healthy-infer-bursty --duration $D --seed 1" \
    "h-infer-2|$W healthy-infer-bursty --duration $D --seed 2" \
    "h-compile|$W healthy-compile --duration $D --batch 4" \
    "h-cudnn|$W healthy-cudnn --duration $D --batch 32 --seed 2" \
    "h-ckpt|$W healthy-ckpt --duration $D --batch 4 --ckpt-s 45" \
    "h-gradaccum|$W healthy-long --duration $D --batch 2 --accum 8 --ckpt-s 120" \
    "h-train-eval|$W healthy-train-eval --duration $D" \
    "h-empty-cache|$W healthy-empty-cache --duration $D --seed 2"; do
    rec "${job%%|*}" $L healthy ${job#*|} &
    slots+=($!)
  done
  rec h-neighbour-client $L healthy bash -c "$W healthy-steady --duration $D --batch 4 & sleep 40; $W healthy-resnet --duration 90 --batch 32; sleep 50; $W healthy-resnet --duration 80 --batch 32; wait" &
  slots+=($!)
  wait "${slots[@]}"
  rec c-batch-warmup 200 "" $W batch-warmup --growth-s 120 --stage-s 24
  ;;
precision-b)
  # The second command of the same lease: an inference cache and expandable segments, then
  # evaluation close to the limit alone.
  rec c-kv-cache 150 "" $W kv-cache --growth-s 90 --period-s 0.05
  rec c-expandable 150 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W hook-capture --growth-s 90 --every 8
  rec h-tight-eval ${TIGHT_S:-170} healthy $W healthy-tight-eval --duration $((${TIGHT_S:-170} - 40)) --batch 8 --train-s 30 --eval-s 8
  ;;
new-healthy)
  # Healthy shapes the corpus lacks, on one GPU in about eight and a half minutes: a
  # reinforcement-learning loop whose rollouts grow a KV cache to ~60 % of the card and drop
  # it, beside a sweep of short jobs one after another; then an interactive session that loads
  # and frees tens of GiB, alone.
  slots=()
  rec h-rl 300 healthy $W healthy-rl --duration 240 --gen-s 30 --train-s 30 --fraction 0.6 --empty &
  slots+=($!)
  rec h-sweep 300 healthy bash -c "for b in 2 4 8 12 16 6; do $W healthy-steady --duration 35 --batch \$b; sleep 3; done" &
  slots+=($!)
  wait "${slots[@]}"
  rec h-interactive 270 healthy $W healthy-interactive --duration 240 --fraction 0.45 --seed 1
  ;;
new-crashes)
  # A server whose weights are read shard by shard before its KV caches grow to a crash, then
  # a cache that grows from the process's first second.
  rec c-kv-server 240 "" $W kv-server --growth-s 120 --load-s 30 --period-s 0.05
  rec c-grower-young 240 "" $W grower --start-gib 2 --chunk-mib 384 --period-s 0.5
  ;;
reearned)
  # Issue 37's shapes, each alone on the GPU: healthy first (a crash leaves the GPU at risk
  # for a while after), then the crashes. Pauses let each run's processes leave the GPU and
  # its alerts resolve before the next starts; the last lets the final pages arrive.
  rec h-slow-load 250 healthy $W healthy-slow-load --load-gib 32 --load-s 115 --kv-gib 4 --duration 85 --period-s 0.05 --seed 1
  pause 5
  rec h-warmup-saturate 260 healthy $W healthy-warmup-saturate --duration 205 --warmup-s 90 --period-s 0.1 --fraction 0.97 --seed 2
  pause 5
  rec h-ckpt-gather 270 healthy $W healthy-ckpt-gather --duration 210 --ckpt-s 40 --fraction 0.55 --gather-fraction 0.12
  pause 5
  rec c-rising-peaks 280 "" $W rising-peaks --fraction 0.45 --rounds 7 --rollout-s 9 --train-s 12
  pause 5
  rec c-eval-kept 290 "" $W eval-kept --train-s 30 --steps 6
  pause 5
  # Three trials started together meet 40 s later (--sync-at), take their shares of the card
  # one by one, then leak together; the sweep stops the others 15 s after the first one fails.
  [ -n "$PLAN_ONLY" ] && $W sweep-trial --dry-run --trials 3 --growth-s 100 | sed 's/^/   /'
  rec c-multi-leak 240 "" bash -c "at=\$((\$(date +%s) + 40)); for k in 0 1 2; do $W sweep-trial --trial \$k --trials 3 --sync-at \$at --growth-s 100 --seed \$k & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
  pause 20
  ;;
reearned-x4)
  # Issue 37's six shapes twice, on four GPUs of one node side by side (three runs one after
  # another on each GPU, each run alone on its GPU), in about 12 minutes: the first of each
  # shape as in `reearned`, the second ("-2") with other sizes, paces and seeds, kept apart as
  # held out. A run's alerts are those with its GPU's `gpu` label (bench/live/summary.py).
  lane0() {
    GPU=0 rec h-slow-load 250 healthy $W healthy-slow-load --load-gib 32 --load-s 115 --kv-gib 4 --duration 85 --period-s 0.05 --seed 1
    pause 5
    GPU=0 rec c-eval-kept 290 "" $W eval-kept --train-s 30 --steps 6
    pause 20
    GPU=0 rec h-warmup-saturate-2 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.15 --fraction 0.97 --seed 5
  }
  lane1() {
    GPU=1 rec h-warmup-saturate 260 healthy $W healthy-warmup-saturate --duration 205 --warmup-s 90 --period-s 0.1 --fraction 0.97 --seed 2
    pause 5
    GPU=1 rec c-rising-peaks 280 "" $W rising-peaks --fraction 0.45 --rounds 7 --rollout-s 9 --train-s 12
    pause 20
    GPU=1 rec h-ckpt-gather-2 240 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 30 --fraction 0.6 --gather-fraction 0.15
  }
  lane2() {
    GPU=2 rec h-ckpt-gather 270 healthy $W healthy-ckpt-gather --duration 210 --ckpt-s 40 --fraction 0.55 --gather-fraction 0.12
    pause 5
    GPU=2 rec c-multi-leak 240 "" bash -c "at=\$((\$(date +%s) + 40)); for k in 0 1 2; do $W sweep-trial --trial \$k --trials 3 --sync-at \$at --growth-s 100 --seed \$k & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
    pause 20
    GPU=2 rec h-slow-load-2 260 healthy $W healthy-slow-load --load-gib 24 --load-s 140 --kv-gib 6 --duration 70 --period-s 0.08 --seed 3
  }
  lane3() {
    GPU=3 rec c-rising-peaks-2 250 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 8 --train-s 15
    pause 20
    GPU=3 rec c-eval-kept-2 280 "" $W eval-kept --train-s 25 --steps 7
    pause 20
    GPU=3 rec c-multi-leak-2 220 "" bash -c "at=\$((\$(date +%s) + 35)); for k in 0 1; do $W sweep-trial --trial \$k --trials 2 --sync-at \$at --growth-s 110 --seed \$((k + 7)) & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
  }
  side_by_side lane0 lane1 lane2 lane3
  pause 20
  ;;
reearned-final)
  # The six shapes once more, with sizes, paces and seeds none of the earlier runs had, on four
  # GPUs side by side in about nine minutes: the held-out live check of the forecast as it
  # stands after the development on the earlier recordings (all of these go to holdout).
  lane0() {
    GPU=0 rec h-slow-load-3 230 healthy $W healthy-slow-load --load-gib 40 --load-s 95 --kv-gib 3 --duration 80 --period-s 0.06 --seed 11
    pause 15
    GPU=0 rec c-rising-peaks-3 250 "" $W rising-peaks --fraction 0.4 --rounds 6 --rollout-s 10 --train-s 10 --seed 12
  }
  lane1() {
    GPU=1 rec h-warmup-saturate-3 230 healthy $W healthy-warmup-saturate --duration 190 --warmup-s 100 --period-s 0.12 --fraction 0.96 --seed 13
    pause 15
    GPU=1 rec c-eval-kept-3 250 "" $W eval-kept --train-s 22 --steps 6 --seed 14
  }
  lane2() {
    GPU=2 rec h-ckpt-gather-3 230 healthy $W healthy-ckpt-gather --duration 190 --ckpt-s 35 --fraction 0.5 --gather-fraction 0.14 --seed 15
    pause 15
    GPU=2 rec c-multi-leak-3 230 "" bash -c "at=\$((\$(date +%s) + 35)); for k in 0 1 2; do $W sweep-trial --trial \$k --trials 3 --sync-at \$at --growth-s 90 --seed \$((k + 20)) & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
  }
  lane3() {
    GPU=3 rec c-rising-peaks-4 250 "" $W rising-peaks --fraction 0.55 --rounds 5 --rollout-s 7 --train-s 14 --seed 16
    pause 15
    GPU=3 rec h-ckpt-gather-4 230 healthy $W healthy-ckpt-gather --duration 190 --ckpt-s 45 --fraction 0.62 --gather-fraction 0.1 --seed 17
  }
  side_by_side lane0 lane1 lane2 lane3
  pause 20
  ;;
reearned-fifth)
  # Held out from the work after reearned-final (every run to holdout, scored once): the
  # shapes of issue 37 with sizes, paces and seeds no earlier run had, and three that the
  # recordings of those plans lack: a checkpoint gather beside a neighbour that holds its
  # memory and sends no reports (NVML lists it), a leak that keeps a step's logits every few
  # steps, a sequence-length curriculum and a batch warm-up whose stages raise the peak.
  lane0() {
    GPU=0 rec h-ckpt-gather-5 240 healthy bash -c "GPUMEM_RECORD_SKIP=1 $W idle --start-gib 12 --duration 215 & sleep 6; $W healthy-ckpt-gather --duration 185 --ckpt-s 30 --fraction 0.5 --gather-fraction 0.14 --seed 41; st=\$?; kill %1 2>/dev/null; wait; exit \$st"
    pause 10
    GPU=0 rec c-eval-kept-5 240 "" $W eval-kept --train-s 26 --steps 5 --seed 42
  }
  lane1() {
    GPU=1 rec c-kept-logits-3 240 "" $W kept-logits --growth-s 140 --every 3 --seed 43
    pause 10
    GPU=1 rec h-slow-load-4 230 healthy $W healthy-slow-load --load-gib 28 --load-s 100 --kv-gib 5 --duration 70 --period-s 0.07 --seed 44
  }
  lane2() {
    GPU=2 rec c-curriculum-3 240 "" $W curriculum --growth-s 130 --stage-s 25 --seed 45
    pause 10
    GPU=2 rec h-warmup-saturate-4 230 healthy $W healthy-warmup-saturate --duration 190 --warmup-s 80 --period-s 0.1 --fraction 0.95 --seed 46
  }
  lane3() {
    GPU=3 rec c-batch-warmup-4 240 "" $W batch-warmup --growth-s 140 --stage-s 28 --batch-step 3 --seed 47
    pause 10
    GPU=3 rec h-ckpt-gather-6 230 healthy $W healthy-ckpt-gather --duration 190 --ckpt-s 35 --fraction 0.66 --gather-fraction 0.12 --seed 48
  }
  side_by_side lane0 lane1 lane2 lane3
  pause 20
  ;;
reearned-sixth)
  # Held out from the work after reearned-fifth (every run to holdout, scored once): the shapes
  # of issue 37 again with sizes, paces and seeds no earlier run had: gathers near the limit
  # every 25 s, and beside an idle neighbour every 45 s; a slow load of two minutes; a warm-up
  # that saturates over 100 s; evaluations every 20 s that keep their outputs; a batch warm-up
  # in small stages; a curriculum in short stages; rollouts whose peaks rise.
  lane0() {
    GPU=0 rec h-ckpt-gather-7 230 healthy $W healthy-ckpt-gather --duration 190 --ckpt-s 25 --fraction 0.68 --gather-fraction 0.1 --seed 51
    pause 10
    GPU=0 rec c-eval-kept-6 240 "" $W eval-kept --train-s 20 --steps 6 --seed 52
  }
  lane1() {
    GPU=1 rec c-batch-warmup-5 240 "" $W batch-warmup --growth-s 120 --stage-s 22 --batch-step 2 --seed 53
    pause 10
    GPU=1 rec h-slow-load-5 230 healthy $W healthy-slow-load --load-gib 34 --load-s 110 --kv-gib 6 --duration 60 --period-s 0.05 --seed 54
  }
  lane2() {
    GPU=$G2 rec c-curriculum-4 240 "" $W curriculum --growth-s 150 --stage-s 20 --seed 55
    pause 10
    GPU=$G2 rec h-warmup-saturate-5 230 healthy $W healthy-warmup-saturate --duration 170 --warmup-s 100 --period-s 0.08 --fraction 0.9 --seed 56
  }
  lane3() {
    GPU=$G3 rec c-rising-peaks-5 250 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 8 --train-s 12 --seed 57
    pause 10
    GPU=$G3 rec h-ckpt-gather-8 230 healthy bash -c "GPUMEM_RECORD_SKIP=1 $W idle --start-gib 8 --duration 215 & sleep 6; $W healthy-ckpt-gather --duration 185 --ckpt-s 45 --fraction 0.58 --gather-fraction 0.16 --seed 58; st=\$?; kill %1 2>/dev/null; wait; exit \$st"
  }
  four_lanes
  pause 20
  ;;
reearned-seventh)
  # Held out from the work after reearned-sixth (every run to holdout, scored once): healthy
  # kinds older plans recorded, with seeds and sizes none had, beside crashes of this issue:
  # RL rounds that keep their cache (peaks that vary, none rising for good), bursty inference,
  # dynamic padding, gathers of a fifth of the card, a cache emptied every 10 s; three trials
  # leaking together, logits kept every other step, evaluations every 30 s that keep their
  # outputs.
  lane0() {
    GPU=0 rec h-rl-2 220 healthy $W healthy-rl --duration 180 --gen-s 25 --train-s 25 --fraction 0.55 --seed 61
    pause 10
    GPU=0 rec c-multi-leak-4 220 "" bash -c "at=\$((\$(date +%s) + 30)); for k in 0 1 2; do $W sweep-trial --trial \$k --trials 3 --sync-at \$at --growth-s 80 --seed \$((k + 62)) & done; wait -n; first=\$?; sleep 15; kill \$(jobs -p) 2>/dev/null; wait; exit \$first"
  }
  lane1() {
    GPU=1 rec h-infer-4 200 healthy $W healthy-infer-bursty --duration 170 --seed 65
    pause 10
    GPU=1 rec c-kept-logits-4 230 "" $W kept-logits --growth-s 120 --every 2 --seed 66
  }
  lane2() {
    GPU=$G2 rec h-dynpad-4 200 healthy $W healthy-dynpad --duration 170 --batch 6 --seed 67
    pause 10
    GPU=$G2 rec c-eval-kept-7 230 "" $W eval-kept --train-s 30 --steps 4 --seed 68
  }
  lane3() {
    GPU=$G3 rec h-ckpt-gather-9 220 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 30 --fraction 0.6 --gather-fraction 0.2 --seed 69
    pause 10
    GPU=$G3 rec h-empty-cache-2 200 healthy $W healthy-empty-cache --duration 170 --seed 70
  }
  four_lanes
  pause 20
  ;;
reearned-eighth)
  # Held out from the work after reearned-seventh (every run to holdout, scored once): several
  # processes of one sweep on one GPU. Trials that leak with room for several of their
  # allocator's segments each after their cache is used, so that NVML alone sees them grow
  # (three alike; four at two rates; two at one every other step), and a healthy sweep of three
  # trials that keep nothing and leave 3 GiB of the card free.
  lane0() {
    GPU=0 rec c-multi-leak-5 420 "" bash -c "$(trials 3 300 1 81)"
  }
  lane1() {
    GPU=1 rec c-multi-leak-6 400 "" bash -c "$(trials 4 240 '$((k % 2 + 1))' 84)"
  }
  lane2() {
    GPU=$G2 rec h-sweep-2 300 healthy bash -c "$(quiet_trials 3 200 88)"
  }
  lane3() {
    GPU=$G3 rec c-multi-leak-7 360 "" bash -c "$(trials 2 200 2 91)"
  }
  four_lanes
  pause 20
  ;;
reearned-eighth-check)
  # The eighth plan's healthy sweep and its two trials again, side by side on two GPUs: the
  # live check that trials ending together beside 3 GiB free are no inferred OOM, while a
  # trial that runs out still is one on NVML alone.
  GPU=0 rec h-sweep-3 300 healthy bash -c "$(quiet_trials 3 200 93)" &
  slots=($!)
  GPU=1 rec c-multi-leak-8 300 "" bash -c "$(trials 2 200 2 96)" &
  slots+=($!)
  wait "${slots[@]}"
  pause 15
  ;;
reearned-ninth)
  # Held out from the work after reearned-eighth-check, on two GPUs side by side: two trials
  # that keep logits every fourth step (half the pace of c-multi-leak-7, whose replay twice as
  # slow was paged only at the failure before `oom::first_step_short`), and a healthy sweep of
  # three trials that end one after another beside 3 GiB free.
  GPU=0 rec c-multi-leak-9 440 "" bash -c "$(trials 2 300 4 101)" &
  slots=($!)
  GPU=1 rec h-sweep-4 330 healthy bash -c "$(quiet_trials 3 '$((120 + 60 * k))' 104)" &
  slots+=($!)
  wait "${slots[@]}"
  pause 15
  ;;
reearned-tenth)
  # Held out from the work after reearned-ninth (`oom::Segments`), on four GPUs side by side:
  # two trials at half c-multi-leak-9's pace (its replay twice as slow was paged 32 s ahead
  # only since a rise the cache serves is read as segments to come), three trials at another
  # rate, a warm-up that saturates over four minutes to 96 % and a healthy sweep of two
  # trials that end two minutes apart beside 3 GiB free.
  GPU=0 rec c-multi-leak-10 760 "" bash -c "$(trials 2 600 8 121)" &
  slots=($!)
  GPU=1 rec h-warmup-saturate-6 460 healthy $W healthy-warmup-saturate --duration 400 --warmup-s 240 --period-s 0.12 --fraction 0.96 --seed 61 &
  slots+=($!)
  GPU=2 rec h-sweep-5 480 healthy bash -c "$(quiet_trials 2 '$((300 + 120 * k))' 124)" &
  slots+=($!)
  GPU=3 rec c-multi-leak-11 600 "" bash -c "$(trials 3 450 6 131)" &
  slots+=($!)
  wait "${slots[@]}"
  pause 15
  ;;
reearned-eleventh)
  # Held out from the work after reearned-tenth (segments with nothing in them are cache the
  # allocator gives back, `demand::releasable`), on four GPUs side by side: a warm-up whose
  # record batches each take a segment of their own, to 96 %; a fragmentation crash and a batch
  # warm-up crash (their cache must still count where it cannot be given back); a checkpoint
  # that gathers a fifth of the model every 45 s near the limit.
  GPU=0 rec h-warmup-saturate-7 380 healthy $W healthy-warmup-saturate --duration 320 --warmup-s 200 --period-s 0.1 --fraction 0.97 --seed 71 &
  slots=($!)
  GPU=1 rec c-frag-2 360 "" $W frag --room-gib 10 --growth-s 200 --seed 72 &
  slots+=($!)
  GPU=2 rec c-batch-warmup-6 300 "" $W batch-warmup --growth-s 150 --stage-s 30 --batch-step 3 --seed 73 &
  slots+=($!)
  GPU=3 rec h-ckpt-gather-10 360 healthy $W healthy-ckpt-gather --duration 300 --ckpt-s 45 --fraction 0.6 --gather-fraction 0.15 --seed 74 &
  slots+=($!)
  wait "${slots[@]}"
  pause 15
  ;;
reearned-twelfth)
  # Held out from the work after reearned-eleventh (a rise of what a process holds that its
  # empty segments would give back at its peak is no leak), on four GPUs side by side in under
  # five minutes, new seeds and paces of four kinds: a warm-up that saturates at 90 %,
  # evaluations that keep their outputs every ~23 s (the sixth runs out), a load of 30 GiB over
  # 90 s then serving, and a checkpoint that gathers 12 % of the card every 35 s beside a model
  # at 66 %.
  GPU=0 rec h-warmup-saturate-8 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.15 --fraction 0.95 --seed 81 &
  slots=($!)
  GPU=1 rec c-eval-kept-8 230 "" $W eval-kept --train-s 22 --steps 5 --seed 82 &
  slots+=($!)
  # Two GPUs (GPUS=2): the first two only.
  if [ "${GPUS:-4}" -ge 4 ]; then
    GPU=2 rec h-slow-load-6 220 healthy $W healthy-slow-load --load-gib 30 --load-s 90 --kv-gib 8 --duration 60 --period-s 0.08 --seed 83 &
    slots+=($!)
    GPU=3 rec h-ckpt-gather-11 240 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 35 --fraction 0.65 --gather-fraction 0.12 --seed 84 &
    slots+=($!)
  fi
  wait "${slots[@]}"
  pause 10
  ;;
reearned-thirteenth)
  # After reearned-twelfth, on four GPUs side by side in under five minutes. h-warmup-saturate-8
  # paged live and in no replay: its job runs again on the same schedule (seed 81) with the
  # exporters' per-second readings kept, for development. Held out: the two runs of
  # reearned-twelfth that had no GPU (a checkpoint gathering 12 % of the card every 35 s beside
  # a model at 65 %; a load of 30 GiB over 90 s then serving) and a warm-up with a new seed.
  # Two GPUs (GPUS=2): the first two only.
  GPU=0 rec h-warmup-saturate-8b 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.15 --fraction 0.95 --seed 81 &
  slots=($!)
  GPU=1 rec h-ckpt-gather-11 240 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 35 --fraction 0.65 --gather-fraction 0.12 --seed 84 &
  slots+=($!)
  if [ "${GPUS:-4}" -ge 4 ]; then
    GPU=2 rec h-slow-load-6 220 healthy $W healthy-slow-load --load-gib 30 --load-s 90 --kv-gib 8 --duration 60 --period-s 0.08 --seed 83 &
    slots+=($!)
    GPU=3 rec h-warmup-saturate-9 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.15 --fraction 0.95 --seed 91 &
    slots+=($!)
  fi
  wait "${slots[@]}"
  pause 10
  ;;
reearned-fourteenth)
  # Held out from the work after reearned-thirteenth (every sample analysed however its tick
  # jitters; a leak flag lets go after 30 s of flat floor), on four GPUs side by side in under
  # five minutes, the first live check whose exporters analyse the seconds their replays do:
  # a warm-up that saturates at 93 %, evaluations that keep their outputs (the sixth runs out),
  # a load of 24 GiB over 130 s then serving, and rollouts whose peaks rise until the sixth
  # does not fit. Two GPUs: GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-warmup-saturate-10 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.13 --fraction 0.93 --seed 101; }
  run2() { rec c-eval-kept-9 230 "" $W eval-kept --train-s 25 --steps 5 --seed 102; }
  run3() { rec h-slow-load-7 230 healthy $W healthy-slow-load --load-gib 24 --load-s 130 --kv-gib 6 --duration 50 --period-s 0.08 --seed 103; }
  run4() { rec c-rising-peaks-6 240 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 9 --train-s 14 --seed 104; }
  four_runs
  pause 10
  ;;
reearned-fifteenth)
  # Held out, with the build of reearned-fourteenth's results: the two kinds no live check has
  # yet seen with every second analysed (three trials of a sweep leaking together; a
  # checkpoint gathering 12 % of the card beside a model at 60 %), beside a warm-up to 95 % and
  # evaluations every 30 s that keep their outputs, each with a new seed. Two GPUs: GPUS=2
  # runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec c-multi-leak-12 260 "" bash -c "$(trials 3 180 2 141)"; }
  run2() { rec h-warmup-saturate-11 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.14 --fraction 0.95 --seed 111; }
  run3() { rec h-ckpt-gather-12 240 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 38 --fraction 0.6 --gather-fraction 0.12 --seed 113; }
  run4() { rec c-eval-kept-10 230 "" $W eval-kept --train-s 30 --steps 5 --seed 114; }
  four_runs
  pause 10
  ;;
reearned-sixteenth)
  # Held out after reearned-fifteenth, with the same build: two more warm-ups (to 95 % and to
  # 92 %, the second's last new largest batch 100 s after the one before), a load of 28 GiB over
  # 110 s, and rollouts whose peaks rise until the sixth does not fit, each with a new seed:
  # how often a warm-up without the client is paged, and the kinds of the fourteenth plan again.
  # Two GPUs: GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-warmup-saturate-12 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.12 --fraction 0.96 --seed 121; }
  run2() { rec h-warmup-saturate-13 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 150 --period-s 0.16 --fraction 0.94 --seed 131; }
  run3() { rec h-slow-load-8 230 healthy $W healthy-slow-load --load-gib 28 --load-s 110 --kv-gib 6 --duration 60 --period-s 0.07 --seed 133; }
  run4() { rec c-rising-peaks-7 240 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 8 --train-s 13 --seed 134; }
  four_runs
  pause 10
  ;;
reearned-seventeenth)
  # Held out, with the build after reearned-sixteenth (a process whose rounds rise needs its
  # highest round whichever reading is the steepest): rollouts whose peaks rise from 45 % of the
  # card, a healthy RL loop whose rounds do not rise, evaluations that keep their outputs and a
  # warm-up to 95 %, each with a new seed. Two GPUs: GPUS=2 runs the first two, and GPUS=2
  # HALF=2 the other two.
  run1() { rec c-rising-peaks-8 250 "" $W rising-peaks --fraction 0.45 --rounds 6 --rollout-s 9 --train-s 12 --seed 141; }
  run2() { rec h-rl-3 220 healthy $W healthy-rl --duration 180 --gen-s 25 --train-s 25 --fraction 0.6 --seed 142; }
  run3() { rec c-eval-kept-11 230 "" $W eval-kept --train-s 28 --steps 5 --seed 143; }
  run4() { rec h-warmup-saturate-14 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.13 --fraction 0.95 --seed 144; }
  four_runs
  pause 10
  ;;
reearned-eighteenth)
  # Held out, with the build after reearned-seventeenth, each kind at a pace or size no earlier
  # plan used: evaluations that keep their outputs every ~40 s (the fifth runs out), a load of
  # 20 GiB over 160 s, a checkpoint gathering 18 % of the card every 55 s beside a model at
  # 68 %, and two trials (not three) leaking together. Two GPUs: GPUS=2 runs the first two,
  # and GPUS=2 HALF=2 the other two.
  run1() { rec c-eval-kept-12 270 "" $W eval-kept --train-s 40 --steps 4 --seed 151; }
  run2() { rec h-slow-load-9 260 healthy $W healthy-slow-load --load-gib 20 --load-s 160 --kv-gib 6 --duration 40 --period-s 0.08 --seed 152; }
  run3() { rec h-ckpt-gather-13 250 healthy $W healthy-ckpt-gather --duration 200 --ckpt-s 55 --fraction 0.68 --gather-fraction 0.18 --seed 153; }
  run4() { rec c-multi-leak-13 270 "" bash -c "$(trials 2 170 2 161)"; }
  four_runs
  pause 10
  ;;
reearned-nineteenth)
  # With the build after reearned-eighteenth (a first step's tread measured against the
  # staircase's own gap, from a start): h-warmup-saturate-14's job again with the same seed,
  # for development (without the client it paged live before), and held out a warm-up to 94 %,
  # evaluations every ~25 s that keep their outputs and a batch warm-up whose stages of 30 s
  # raise the peak until one does not fit, each with a new seed. Two GPUs: GPUS=2 runs the
  # first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-warmup-saturate-14b 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.13 --fraction 0.95 --seed 144; }
  run2() { rec h-warmup-saturate-15 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.13 --fraction 0.94 --seed 171; }
  run3() { rec c-eval-kept-13 240 "" $W eval-kept --train-s 25 --steps 5 --seed 172; }
  run4() { rec c-batch-warmup-7 240 "" $W batch-warmup --growth-s 150 --stage-s 30 --seed 173; }
  four_runs
  pause 10
  ;;
reearned-twentieth)
  # Held out, with the build after the tread rule, the kinds it could move: a warm-up to 96 %
  # (without the client, whether its first step after loading is read as the load's tail), a
  # checkpoint gathering 20 % of the card every 90 s (a slow schedule), a curriculum whose
  # steps grow until one does not fit and evaluations every ~36 s that keep their outputs
  # (whether a crash's first step is still read as growth), each with a new seed. Two GPUs:
  # GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-warmup-saturate-16 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 140 --period-s 0.12 --fraction 0.96 --seed 181; }
  run2() { rec h-ckpt-gather-14 250 healthy $W healthy-ckpt-gather --duration 210 --ckpt-s 90 --fraction 0.62 --gather-fraction 0.2 --seed 182; }
  run3() { rec c-curriculum-5 240 "" $W curriculum --growth-s 130 --stage-s 25 --seed 183; }
  run4() { rec c-eval-kept-14 250 "" $W eval-kept --train-s 35 --steps 4 --seed 184; }
  four_runs
  pause 10
  ;;
reearned-twenty-first)
  # Held out, with the build after the tread rule read past the window's cut: jobs that run
  # longer than the five-minute forecast window after their loading, so that the window slides
  # past the loading's end while they run (a checkpoint gathering 20 % of the card every 100 s
  # beside a model at 62 %; a warm-up to 95 % over 200 s; evaluations every ~50 s that keep
  # their outputs until the sixth runs out; two trials leaking slowly together), each with a
  # new seed. Two GPUs: GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-ckpt-gather-15 410 healthy $W healthy-ckpt-gather --duration 370 --ckpt-s 100 --fraction 0.62 --gather-fraction 0.2 --seed 191; }
  run2() { rec h-warmup-saturate-17 400 healthy $W healthy-warmup-saturate --duration 350 --warmup-s 200 --period-s 0.13 --fraction 0.95 --seed 192; }
  run3() { rec c-eval-kept-15 410 "" $W eval-kept --train-s 50 --steps 5 --seed 193; }
  run4() { rec c-multi-leak-14 410 "" bash -c "$(trials 2 300 2 194)"; }
  four_runs
  pause 10
  ;;
reearned-twenty-second)
  # Held out, with the build after the twenty-first plan, the kinds it has not yet watched, each
  # at a pace no earlier plan used: rollouts whose peaks rise from 40 % of the card over seven
  # rounds, a healthy RL loop whose rounds reach 70 % and do not rise, a load of 30 GiB over
  # 150 s, and a batch raised every 35 s until a stage does not fit, each with a new seed. Two
  # GPUs: GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec c-rising-peaks-9 270 "" $W rising-peaks --fraction 0.4 --rounds 7 --rollout-s 10 --train-s 12 --seed 201; }
  run2() { rec h-rl-4 250 healthy $W healthy-rl --duration 210 --gen-s 20 --train-s 20 --fraction 0.7 --seed 202; }
  run3() { rec h-slow-load-10 260 healthy $W healthy-slow-load --load-gib 30 --load-s 150 --kv-gib 8 --duration 60 --period-s 0.08 --seed 203; }
  run4() { rec c-batch-warmup-8 260 "" $W batch-warmup --growth-s 160 --stage-s 35 --seed 204; }
  four_runs
  pause 10
  ;;
reearned-twenty-third)
  # Held out, with the build of the twenty-second plan: how often a warm-up by ever larger
  # batches is paged on NVML alone (two of the twenty in the corpus), with two more (to 96 % in
  # 120 s, to 93 % in 160 s), beside gathers of 15 % every 45 s beside a model at 70 % and
  # evaluations every ~20 s that keep their outputs, each with a new seed. Two GPUs: GPUS=2
  # runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-warmup-saturate-18 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.12 --fraction 0.96 --seed 211; }
  run2() { rec h-warmup-saturate-19 260 healthy $W healthy-warmup-saturate --duration 220 --warmup-s 160 --period-s 0.14 --fraction 0.93 --seed 212; }
  run3() { rec h-ckpt-gather-16 250 healthy $W healthy-ckpt-gather --duration 200 --ckpt-s 45 --fraction 0.7 --gather-fraction 0.15 --seed 213; }
  run4() { rec c-eval-kept-16 250 "" $W eval-kept --train-s 20 --steps 6 --seed 214; }
  four_runs
  pause 10
  ;;
reearned-twenty-fourth)
  # Held out, with the build after the twenty-third plan: a kind the corpus lacked, a server's
  # cache of sessions that fills ever more slowly (a smooth rise that saturates, at two paces:
  # to 85 % with a time constant of 60 s, to 90 % with 75 s), beside evaluations every ~25 s
  # that keep their outputs and gathers of 15 % every 45 s beside a model at 70 %, each with a
  # new seed. Two GPUs: GPUS=2 runs the first two, and GPUS=2 HALF=2 the other two.
  run1() { rec h-kv-saturate-1 270 healthy $W healthy-kv-saturate --duration 240 --tau-s 60 --life-s 20 --fraction 0.85 --seed 241; }
  run2() { rec c-eval-kept-17 250 "" $W eval-kept --train-s 24 --steps 5 --seed 242; }
  run3() { rec h-kv-saturate-2 280 healthy $W healthy-kv-saturate --duration 255 --tau-s 75 --life-s 30 --fraction 0.9 --seed 243; }
  run4() { rec h-ckpt-gather-17 250 healthy $W healthy-ckpt-gather --duration 215 --ckpt-s 45 --fraction 0.7 --gather-fraction 0.15 --seed 244; }
  four_runs
  pause 10
  ;;
reearned-twenty-fifth)
  # Held out, with the build that reads a rise past the loading's cap whole: a server's cache
  # of sessions that fills more slowly still (to 85 % with a time constant of 90 s), beside a
  # server whose weights are read for 75 s (past the cap) before its KV caches grow without
  # eviction until they do not fit (a load, then a leak at a steady pace: one curve it is
  # not), each with a new seed. Two GPUs (GPUS=2).
  run1() { rec h-kv-saturate-3 270 healthy $W healthy-kv-saturate --duration 245 --tau-s 90 --life-s 25 --fraction 0.85 --seed 251; }
  run2() { rec c-kv-server-2 270 "" $W kv-server --growth-s 110 --load-s 75 --period-s 0.05 --seed 252; }
  four_runs
  pause 10
  ;;
reearned-twenty-sixth)
  # Held out, with the build that also ends a capped loading where its ramp stops: a server's
  # cache of sessions that fills fast (to 88 % with a time constant of 45 s, sessions of 15 s),
  # beside a server whose weights are read for 130 s (far past the cap) before its KV caches
  # grow without eviction until they do not fit, each with a new seed. Two GPUs (GPUS=2), or
  # one after the other on one (GPUS=1).
  run1() { rec h-kv-saturate-4 260 healthy $W healthy-kv-saturate --duration 230 --tau-s 45 --life-s 15 --fraction 0.88 --seed 261; }
  run2() { rec c-kv-server-3 300 "" $W kv-server --growth-s 90 --load-s 130 --period-s 0.05 --seed 262; }
  if [ "${GPUS:-2}" -lt 2 ]; then
    GPU=0 run1
    pause 10
    GPU=0 run2
  else
    four_runs
  fi
  pause 10
  ;;
reearned-twenty-seventh)
  # Held out, with the build after the twenty-sixth plan: two healthy jobs beside each other on
  # one GPU (a model at 45 % whose checkpoint gathers 10 % of the card every 30 s, and 70 s
  # later a warm-up by ever larger batches that fills the card to 95 % over 120 s, sized with
  # the first in its sight), each the other's neighbour; beside them, on the other GPU,
  # evaluations every ~45 s that keep their outputs until the fifth does not fit. New seeds.
  # Two GPUs (GPUS=2).
  lane0() {
    GPU=0 rec h-ckpt-gather-18 300 healthy $W healthy-ckpt-gather --duration 270 --ckpt-s 30 --fraction 0.45 --gather-fraction 0.1 --seed 271 &
    local first=$!
    pause 70 # after the first gather, whose block its cache then keeps
    GPU=0 rec h-warmup-saturate-20 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.12 --fraction 0.95 --seed 272
    wait $first
  }
  lane1() { GPU=1 rec c-eval-kept-18 300 "" $W eval-kept --train-s 40 --steps 4 --seed 273; }
  side_by_side lane0 lane1
  pause 10
  ;;
reearned-twenty-eighth)
  # Held out, watched live by the build that forecasts a smooth rise that slowed at its pace
  # now: weights of 40 GiB read for 110 s from storage whose speed varies shard by shard, then
  # a KV pool and steady serving (healthy: a rise whose pace falls, then stops), beside a server
  # whose weights are read for 100 s before its KV caches grow more slowly than the last
  # plan's until they do not fit. New seeds. Two GPUs (GPUS=2).
  run1() { rec h-slow-load-11 300 healthy $W healthy-slow-load --load-gib 40 --load-s 110 --kv-gib 20 --duration 150 --period-s 0.08 --seed 281; }
  run2() { rec c-kv-server-4 300 "" $W kv-server --growth-s 140 --load-s 100 --period-s 0.05 --seed 282; }
  four_runs
  pause 10
  ;;
reearned-twenty-ninth)
  # Held out, watched live by the build that reads a rise whose loading ended without a break
  # whole: two servers' caches of sessions that fill fast from their first seconds (to 88 %
  # with a time constant of 45 s, as the twenty-sixth plan's; to 85 % with 30 s), new seeds.
  # Two GPUs (GPUS=2).
  run1() { rec h-kv-saturate-5 240 healthy $W healthy-kv-saturate --duration 200 --tau-s 45 --life-s 15 --fraction 0.88 --seed 291; }
  run2() { rec h-kv-saturate-6 240 healthy $W healthy-kv-saturate --duration 200 --tau-s 30 --life-s 20 --fraction 0.85 --seed 292; }
  four_runs
  pause 10
  ;;
reearned-thirtieth)
  # Held out, watched live by the build whose saturating curve is timed to the tenth of a
  # second and checked on the tail's pace: a sessions' cache that fills faster and higher than
  # any before (to 90 % with a time constant of 35 s), beside RL rounds whose rollouts grow
  # until one does not fit. New seeds. Two GPUs (GPUS=2).
  run1() { rec h-kv-saturate-7 240 healthy $W healthy-kv-saturate --duration 200 --tau-s 35 --life-s 12 --fraction 0.9 --seed 301; }
  run2() { rec c-rising-peaks-10 240 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 9 --train-s 12 --seed 302; }
  four_runs
  pause 10
  ;;
reearned-thirty-first)
  # Held out, the same build: evaluations every ~35 s that keep their outputs until the sixth
  # does not fit, beside a warm-up by ever larger batches to 93 % over 100 s, then steady.
  # New seeds. Two GPUs (GPUS=2).
  run1() { rec c-eval-kept-19 240 "" $W eval-kept --train-s 30 --steps 5 --seed 311; }
  run2() { rec h-warmup-saturate-21 240 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 100 --period-s 0.1 --fraction 0.93 --seed 312; }
  four_runs
  pause 10
  ;;
reearned-thirty-second)
  # Held out, watched live by the build that reads a floor slowing towards a level as filling,
  # not leaking: three trials of a sweep leaking together until the card is full, beside a
  # sessions' cache to 87 % with a time constant of 50 s. New seeds. Two GPUs (GPUS=2).
  run1() { rec c-multi-leak-15 260 "" bash -c "$(trials 3 180 2 321)"; }
  run2() { rec h-kv-saturate-8 240 healthy $W healthy-kv-saturate --duration 210 --tau-s 50 --life-s 20 --fraction 0.87 --seed 322; }
  four_runs
  pause 10
  ;;
reearned-thirty-third)
  # Held out, watched live by the build whose request a segment taken again sizes: three sweep
  # trials leaking together again, beside a model at 55 % whose checkpoint gathers 12 % of
  # the card every 40 s. New seeds. Two GPUs (GPUS=2).
  run1() { rec c-multi-leak-16 260 "" bash -c "$(trials 3 180 2 331)"; }
  run2() { rec h-ckpt-gather-19 240 healthy $W healthy-ckpt-gather --duration 210 --ckpt-s 40 --fraction 0.55 --gather-fraction 0.12 --seed 332; }
  four_runs
  pause 10
  ;;
reearned-thirty-fourth)
  # Held out, watched live by the build that knows an evaluation's first step in hindsight
  # where the allocator shows both steps in use: evaluations every ~30 s that keep their
  # outputs until the sixth does not fit, beside a warm-up by ever larger batches (whose
  # segments come in steps of one size too, held unused) to 95 % over 90 s, then steady.
  # New seeds. Two GPUs (GPUS=2).
  run1() { rec c-eval-kept-20 240 "" $W eval-kept --train-s 25 --steps 5 --seed 341; }
  run2() { rec h-warmup-saturate-22 240 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 90 --period-s 0.1 --fraction 0.95 --seed 342; }
  four_runs
  pause 10
  ;;
reearned-thirty-fifth)
  # Held out, the same build: a batch raised every 25 s until a stage does not fit (its steps
  # in use, of growing size), beside a tight evaluation that takes memory and frees it (a
  # round, healthy). New seeds. Two GPUs (GPUS=2).
  run1() { rec c-batch-warmup-9 240 "" $W batch-warmup --growth-s 140 --stage-s 25 --seed 351; }
  run2() { rec h-tight-eval-3 240 healthy $W healthy-tight-eval --duration 190 --batch 8 --train-s 30 --eval-s 8 --seed 352; }
  four_runs
  pause 10
  ;;
reearned-thirty-sixth)
  # Held out: sessions whose pool is past the card, so that the server runs out as its rise
  # slows (a crash whose growth decays, the shape a saturating fit could excuse), beside the
  # same server whose pool leaves the card a fifth free (healthy). New seeds. Four GPUs.
  run1() { rec c-kv-decay-1 250 "" $W kv-decay --duration 220 --tau-s 45 --life-s 15 --fraction 1.0 --seed 361; }
  run2() { rec c-kv-decay-2 250 "" $W kv-decay --duration 220 --tau-s 70 --life-s 25 --fraction 1.03 --seed 362; }
  run3() { rec h-kv-saturate-9 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 60 --life-s 20 --fraction 0.8 --seed 363; }
  run4() { rec c-kv-decay-3 250 "" $W kv-decay --duration 220 --tau-s 30 --life-s 10 --fraction 1.1 --seed 364; }
  four_runs
  pause 10
  ;;
reearned-thirty-seventh)
  # Held out, watched live by the build that reads a slowing rise at its pace now: two more
  # servers whose sessions' pool is past the card, beside two whose pool leaves room (one of
  # them the shape that pages, τ 45 s to 88 %). New seeds. Four GPUs.
  run1() { rec c-kv-decay-4 250 "" $W kv-decay --duration 220 --tau-s 60 --life-s 20 --fraction 1.02 --seed 371; }
  run2() { rec h-kv-saturate-10 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 45 --life-s 15 --fraction 0.88 --seed 372; }
  run3() { rec c-kv-decay-5 250 "" $W kv-decay --duration 220 --tau-s 90 --life-s 30 --fraction 1.05 --seed 373; }
  run4() { rec h-kv-saturate-11 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 75 --life-s 25 --fraction 0.9 --seed 374; }
  four_runs
  pause 10
  ;;
reearned-thirty-eighth)
  # Held out, the same build: the healthy rises that slow which a rise current at its pace now
  # could hold longer (weights read from slow storage, a warm-up by ever larger batches to
  # 95 %, sessions to 86 %), beside one more server whose pool is past the card. New seeds.
  # Four GPUs.
  run1() { rec h-slow-load-12 260 healthy $W healthy-slow-load --load-gib 30 --load-s 140 --kv-gib 10 --duration 60 --period-s 0.08 --seed 381; }
  run2() { rec h-warmup-saturate-23 250 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 120 --period-s 0.12 --fraction 0.95 --seed 382; }
  run3() { rec h-kv-saturate-12 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 60 --life-s 20 --fraction 0.86 --seed 383; }
  run4() { rec c-kv-decay-6 250 "" $W kv-decay --duration 220 --tau-s 50 --life-s 20 --fraction 1.03 --seed 384; }
  four_runs
  pause 10
  ;;
reearned-thirty-ninth)
  # Held out, the same build, on the issue's crash shapes that are no smooth rise (rounds
  # whose peaks rise, a sweep's trials leaking together, evaluations that keep their outputs)
  # beside a checkpoint gather near the limit (healthy). New seeds. Four GPUs.
  run1() { rec c-rising-peaks-11 240 "" $W rising-peaks --fraction 0.5 --rounds 6 --rollout-s 9 --train-s 12 --seed 391; }
  run2() { rec c-multi-leak-17 260 "" bash -c "$(trials 3 180 2 392)"; }
  run3() { rec c-eval-kept-21 240 "" $W eval-kept --train-s 25 --steps 5 --seed 393; }
  run4() { rec h-ckpt-gather-20 240 healthy $W healthy-ckpt-gather --duration 210 --ckpt-s 40 --fraction 0.6 --gather-fraction 0.12 --seed 394; }
  four_runs
  pause 10
  ;;
reearned-fortieth)
  # Held out, watched live by the build whose smooth rises page only once their ETA is no
  # longer than they have been seen rising: the sessions' shape that paged (τ 45 s to 88 %,
  # healthy), then its crash twin whose pool is the whole card. New seeds. One GPU, one after
  # the other.
  GPU=0 rec h-kv-saturate-13 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 45 --life-s 15 --fraction 0.88 --seed 401
  pause 10
  GPU=0 rec c-kv-decay-7 250 "" $W kv-decay --duration 220 --tau-s 45 --life-s 15 --fraction 1.0 --seed 402
  pause 10
  ;;
reearned-forty-first)
  # Held out, the same build, on the crashes it pages later: rises that run out under two
  # minutes after their growth began (an inference cache, activations kept by hooks in
  # expandable segments) and a sweep's trials leaking together. New lengths and seeds. One
  # GPU, one after the other.
  GPU=0 rec c-kv-cache-3 180 "" $W kv-cache --growth-s 110 --period-s 0.05 --seed 411
  pause 10
  GPU=0 rec c-expandable-3 180 "" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $W hook-capture --growth-s 110 --every 8 --seed 412
  pause 10
  GPU=0 rec c-multi-leak-18 200 "" bash -c "$(trials 3 100 2 413)"
  pause 10
  ;;
reearned-forty-second)
  # Held out, watched live by the build that reads steps each larger than the one before,
  # without the allocator's report, as the cache of a request that grows: two warm-ups by
  # ever rarer new largest batches (the gain: without the client they paged), a curriculum in
  # short stages whose activations grow stage by stage until one does not fit (the cost: a
  # crash whose steps may grow too), and evaluations that keep their outputs. New seeds. One
  # GPU, one after the other.
  GPU=0 rec h-warmup-saturate-24 260 healthy $W healthy-warmup-saturate --duration 220 --warmup-s 160 --period-s 0.14 --fraction 0.95 --seed 421
  pause 10
  GPU=0 rec c-curriculum-6 260 "" $W curriculum --growth-s 180 --stage-s 12 --seed 422
  pause 10
  GPU=0 rec c-eval-kept-22 240 "" $W eval-kept --train-s 25 --steps 5 --seed 423
  pause 10
  GPU=0 rec h-warmup-saturate-25 260 healthy $W healthy-warmup-saturate --duration 220 --warmup-s 150 --period-s 0.12 --fraction 0.96 --seed 424
  pause 10
  ;;
reearned-forty-third)
  # Held out, watched live by the same build once memory given back within the window turns
  # that reading off (the allocator flushed its cache under pressure and took the memory
  # again): a curriculum in short stages and a warm-up by ever rarer new largest batches.
  # New seeds. One GPU, one after the other.
  GPU=0 rec c-curriculum-7 260 "" $W curriculum --growth-s 170 --stage-s 12 --seed 431
  pause 10
  GPU=0 rec h-warmup-saturate-26 260 healthy $W healthy-warmup-saturate --duration 200 --warmup-s 140 --period-s 0.12 --fraction 0.96 --seed 432
  pause 10
  ;;
reearned-forty-fourth)
  # Held out, watched live by the build whose smooth rise that slowed to half its pace holds
  # no page (the GPU's critical is re-earned from the pace now): a server's cache of sessions
  # that fills ever more slowly and leaves the card room (the gain), a server whose pool is
  # past the card and runs out as its rise slows, and a sweep's trials leaking together (the
  # cost: several processes, each slow, that fail together). New seeds. One GPU, one after
  # the other.
  GPU=0 rec h-kv-saturate-14 250 healthy $W healthy-kv-saturate --duration 220 --tau-s 75 --life-s 25 --fraction 0.88 --seed 441
  pause 10
  GPU=0 rec c-kv-decay-8 250 "" $W kv-decay --duration 220 --tau-s 75 --life-s 25 --fraction 1.02 --seed 443
  pause 10
  GPU=0 rec c-multi-leak-19 250 "" bash -c "$(trials 3 150 2 442)"
  pause 10
  ;;
reearned-forty-fifth)
  # Held out, watched live by the build of 2026-11-29 (fourth; the forecast unchanged since
  # the forty-fourth plan, its analysis cheaper): the issue's kinds at sizes and paces none of
  # the corpus has on this card. A load of 50 GiB from slow storage (the largest so far 40), a
  # checkpoint gather to 89 % of the card (a model at 72 %, 17 % gathered every 25 s), RL
  # rounds whose fifth rollout does not fit, and evaluations that keep a sixth of the card
  # every 19 s (the shortest gap so far). New seeds. One GPU, one after the other.
  GPU=0 rec h-slow-load-13 230 healthy $W healthy-slow-load --load-gib 50 --load-s 120 --kv-gib 12 --duration 60 --period-s 0.08 --seed 451
  pause 10
  GPU=0 rec c-rising-peaks-12 170 "" $W rising-peaks --fraction 0.55 --rounds 5 --rollout-s 11 --train-s 10 --seed 454
  pause 10
  GPU=0 rec c-eval-kept-23 200 "" $W eval-kept --train-s 18 --steps 6 --seed 452
  pause 10
  GPU=0 rec h-ckpt-gather-21 215 healthy $W healthy-ckpt-gather --duration 180 --ckpt-s 25 --fraction 0.72 --gather-fraction 0.17 --seed 453
  pause 10
  ;;
reearned-forty-sixth)
  # Held out, watched live by the build whose first round begun as the load ended is a round
  # (2026-11-29, fourth): two RL loops whose rollouts' peaks rise to a crash, the first
  # rollout right after the weights (the shape the forty-fifth plan's missed), and a healthy RL
  # loop whose rollouts' peaks vary about a level (the cost). New seeds. One GPU, one after
  # the other.
  GPU=0 rec c-rising-peaks-13 170 "" $W rising-peaks --fraction 0.5 --rounds 5 --rollout-s 10 --train-s 12 --seed 461
  pause 10
  GPU=0 rec h-rl-5 180 healthy $W healthy-rl --duration 150 --gen-s 20 --train-s 15 --fraction 0.65 --seed 462
  pause 10
  GPU=0 rec c-rising-peaks-14 175 "" $W rising-peaks --fraction 0.4 --rounds 6 --rollout-s 8 --train-s 10 --seed 463
  pause 10
  ;;
reearned-forty-seventh)
  # Held out, watched live by the build of 2026-11-29 (fourth and its guard): the issue's kinds
  # at points the corpus lacks. A slow load (30 GiB over 150 s) followed by a KV pool of half
  # the card taken at once, as a serving engine does; evaluations every 32 s that keep a fifth
  # of the card; a gather of a quarter of the card every 45 s beside a model at 62 % (to 87 %);
  # RL rounds of 12 s rollouts whose sixth does not fit. New seeds. One GPU, one after the
  # other.
  GPU=0 rec h-slow-load-14 235 healthy $W healthy-slow-load --load-gib 30 --load-s 150 --kv-gib 70 --duration 50 --period-s 0.08 --seed 471
  pause 10
  GPU=0 rec c-eval-kept-24 210 "" $W eval-kept --train-s 32 --steps 4 --seed 472
  pause 10
  GPU=0 rec h-ckpt-gather-22 185 healthy $W healthy-ckpt-gather --duration 150 --ckpt-s 45 --fraction 0.62 --gather-fraction 0.25 --seed 473
  pause 10
  GPU=0 rec c-rising-peaks-15 210 "" $W rising-peaks --fraction 0.45 --rounds 6 --rollout-s 12 --train-s 8 --seed 474
  pause 10
  ;;
reearned-forty-eighth)
  # Held out, watched live by the build whose steps are only the levels a series keeps
  # (2026-11-29, sixth): gathers of a fifth of the card every 35 s beside a model at 66 %
  # whose activations swing by gigabytes; three trials of a sweep leaking together; a cache of
  # sessions that fills ever more slowly to 86 % of the card; evaluations every 26 s that keep
  # their outputs (the fifth does not fit). New seeds. One GPU, one after the other.
  GPU=0 rec h-ckpt-gather-23 190 healthy $W healthy-ckpt-gather --duration 160 --ckpt-s 35 --fraction 0.66 --gather-fraction 0.2 --seed 481
  pause 10
  GPU=0 rec c-multi-leak-20 220 "" bash -c "$(trials 3 130 2 482)"
  pause 10
  GPU=0 rec h-kv-saturate-15 245 healthy $W healthy-kv-saturate --duration 210 --tau-s 55 --life-s 20 --fraction 0.86 --seed 485
  pause 10
  GPU=0 rec c-eval-kept-25 200 "" $W eval-kept --train-s 26 --steps 4 --seed 486
  pause 10
  ;;
reearned-forty-ninth)
  # Held out, watched live by the same build as the forty-eighth: weights read from slow
  # storage for 100 s with no pool after them; a warm-up that saturates at 94 % under a
  # sawtooth of batches; RL rounds from 50 % whose fifth does not fit. New seeds. One GPU, one
  # after the other.
  GPU=0 rec h-slow-load-15 190 healthy $W healthy-slow-load --load-gib 40 --load-s 100 --kv-gib 0 --duration 60 --period-s 0.08 --seed 491
  pause 10
  GPU=0 rec h-warmup-saturate-27 200 healthy $W healthy-warmup-saturate --duration 170 --warmup-s 110 --period-s 0.11 --fraction 0.94 --seed 492
  pause 10
  GPU=0 rec c-rising-peaks-16 210 "" $W rising-peaks --fraction 0.5 --rounds 5 --rollout-s 14 --train-s 8 --seed 493
  pause 10
  ;;
reearned-check)
  # A short live check on two GPUs side by side: the checkpoint gather (healthy) and the
  # evaluation that keeps its outputs (a crash), shortened to fit about four minutes.
  GPU=0 rec h-ckpt-gather-check 200 healthy $W healthy-ckpt-gather --duration 165 --ckpt-s 40 --fraction 0.55 --gather-fraction 0.12 &
  slots=($!)
  GPU=1 rec c-eval-kept-check 200 "" $W eval-kept --train-s 18 --steps 5 &
  slots+=($!)
  wait "${slots[@]}"
  pause 15
  ;;
*)
  echo "unknown plan $PLAN" >&2
  exit 2
  ;;
esac
if [ -n "${LIVE_PIDS:-}" ]; then
  live_collect "$OUT"
  python3 bench/live/summary.py "$OUT" >"$OUT/pages.txt" 2>&1
fi
if [ -n "$PLAN_ONLY" ]; then
  echo "plan done at $(elapsed) s at the latest${BUDGET_S:+ (budget $BUDGET_S s)}" | tee -a "$OUT/runs.txt"
else
  echo "session done $(($(date +%s) - T0)) s" | tee -a "$OUT/runs.txt"
fi
