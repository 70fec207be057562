#!/usr/bin/env bash
# The forecast's CPU: every recording of the corpus (data/corpus/*/*/*.jsonl.gz) replayed at
# 1 s by one or more builds, the user and system CPU seconds of each build's replays summed, and
# whether every build wrote the same timelines (a change meant to be faster only must write the
# same bytes).
#
#   bash bench/replay_cpu.sh BIN [BIN...]
#
# A benchmark: it never fails on a number. Compare builds within one run: the machine's load
# moves the figures between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || { echo "usage: bash bench/replay_cpu.sh BIN [BIN...]" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=(data/corpus/*/*/*.jsonl.gz)
i=0
for bin in "$@"; do
  i=$((i + 1))
  mkdir "$work/$i"
  # bash's `times` over a subshell that runs only the replays: its children's CPU time.
  cpu=$(
    (
      n=0
      for f in "${runs[@]}"; do
        n=$((n + 1))
        gzip -dc "$f" >"$work/in.jsonl"
        "$bin" replay "$work/in.jsonl" -o "$work/$i/$n.tl" 2>/dev/null
      done
      times
    ) | tail -1
  )
  same=yes
  if ((i > 1)) && ! diff -rq "$work/1" "$work/$i" >/dev/null; then same=no; fi
  printf '%s\t%d recordings\tCPU (user, system of the replays): %s\tsame timelines as the first: %s\n' \
    "$bin" "${#runs[@]}" "$cpu" "$( ((i > 1)) && echo "$same" || echo -)"
done
