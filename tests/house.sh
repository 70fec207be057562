#!/usr/bin/env bash
# The shape of the tree: no code file over 800 code lines (lines neither blank nor only a
# comment), and recorded data (traces, recordings, benchmark output) only under data/, so that
# the code rooms hold code. fuzz/corpus holds the fuzzers' seed inputs, which are written by
# hand. Reads the files on disk (CI runs it on a copy without .git).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=800
fail=0
prune=(-path ./target -o -path ./.git -o -path './.venv*' -o -path ./.live -o -path ./data
  -o -path ./fuzz/corpus -o -path ./fuzz/target -o -name __pycache__ -o -name .pytest_cache)

while IFS= read -r -d '' f; do
  case "$f" in
    *.rs) comment='//' ;;
    *) comment='#' ;;
  esac
  n=$(grep -cvE "^[[:space:]]*(\$|$comment)" "$f" || true)
  if ((n > LIMIT)); then
    echo "house: $f has $n code lines (at most $LIMIT): split it by what its parts do" >&2
    fail=1
  fi
done < <(find . \( "${prune[@]}" \) -prune -o -type f \( -name '*.rs' -o -name '*.py' -o -name '*.sh' \) -print0)

while IFS= read -r -d '' f; do
  echo "house: $f is recorded data among the code: it belongs under data/ (see data/README.md)" >&2
  fail=1
done < <(find . \( "${prune[@]}" \) -prune -o -type f \( -name '*.jsonl' -o -name '*.jsonl.gz' -o -name '*.csv' -o -name '*.log' \) -print0)

if ((fail)); then exit 1; fi
echo "house: every code file within $LIMIT code lines, recorded data only under data/"
