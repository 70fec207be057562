#!/usr/bin/env bash
# The lean server (`--no-default-features`, what the container image ships): it builds and
# lints clean, links no charting, font or terminal-UI crate, serves, and refuses the chart
# flags and `top` with a message that says why, before doing any work.
#
#   tests/lean.sh      # builds in target/lean, apart from the default build's binary
#
# LEAN_TARGET_DIR and LEAN_PROFILE choose the target directory and the cargo profile instead:
# tests/all.sh builds it in its own, beside the default features, so that the dependencies
# both share are built once.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "lean build: $*" >&2; exit 1; }

target_dir=${LEAN_TARGET_DIR:-target/lean}
profile=${LEAN_PROFILE:-dev}
out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
cargo clippy --quiet --no-default-features --all-targets --profile "$profile" --target-dir "$target_dir" -- -D warnings
if cargo tree -e normal --no-default-features | grep -E '^\W*(plotters|ratatui|dejavu|png) v'; then
  fail "links charting or a terminal UI"
fi
cargo build --quiet --no-default-features --profile "$profile" --target-dir "$target_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy: a build of the default features in the same directory replaces the original.
bin=$work/gpumem-exporter
cp "$target_dir/$out_dir/gpumem-exporter" "$bin"

refuses() {
  local what=$1
  shift
  local out code=0
  out=$("$bin" "$@" 2>&1) || code=$?
  [ "$code" -eq 2 ] || fail "$what: exit status $code, not 2 (a usage error): $out"
  grep -q "was built without the \`$what\` feature" <<<"$out" || fail "$what: no clear message: $out"
  echo "refused, as it should: $bin $* -> $out"
}
refuses charts profile --source sim --duration 1 --plot "$work/p.png"
refuses charts replay data/traces/d1-oom.jsonl --chart "$work/c.png"
refuses tui top --source sim
[ ! -e "$work/p.png" ] && [ ! -e "$work/c.png" ] || fail "a refused chart was written"

# What needs no drawing still works.
"$bin" replay data/traces/d1-oom.jsonl --summary "$work/s.json" >/dev/null
grep -q '"oom_t"' "$work/s.json" || fail "replay --summary did not work"
echo "lean build: ok"
