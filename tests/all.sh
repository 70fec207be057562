#!/usr/bin/env bash
# Every test of the project, on a fresh Debian machine: installs what it needs, then runs the
# Rust checks and tests, the Python client's tests, the chart tests, the rule tests and the
# end-to-end checks with real Prometheus and Alertmanager. Any failure fails the whole run.
#
# Rust is built in the `ci` profile of Cargo.toml (opt-level 1, debug assertions on). The lean
# server (no default features, the container image's) is built first, alone on the cores: the
# three crashes replayed in real time (about 7 minutes, the longest step) run on it from as
# soon as it is built, beside everything after. Then the exporter with every test's
# dependencies, once; clippy checks in the same profile. The Debian packages install in the
# background beside the first build; what needs no build (the Python client, Helm, promtool,
# the mixin, the container image) runs in the background once they are in, and the end-to-end
# run once the full exporter is built: it and the real-time crashes are mostly waiting. Each
# background job writes to a log of its own, printed whole when it ends; every step's time is
# printed after it and in a table at the end. A failing step does not stop the others (but for
# the build of the exporter with the tests' dependencies, without which none can run): the run
# goes on, and fails at the end, naming every step that failed.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=ci
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
# The binary the runs and tests use: a copy, so that no later build changes it under them.
WORK=$(mktemp -d)
BIN="$WORK/gpumem-exporter"
STEPS="$WORK/steps.tsv"
: >"$STEPS"
START=$SECONDS
declare -A BG_PID=() BG_TITLE=()

mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# step TITLE COMMAND...: runs COMMAND under a header and records how long it took and whether
# it failed; returns COMMAND's status.
step() {
  local title=$1 t=$SECONDS rc=0
  shift
  printf '\n==== %s ====\n' "$title"
  "$@" || rc=$?
  local took=$((SECONDS - t)) status=ok
  [ "$rc" -eq 0 ] || status="FAILED (exit status $rc)"
  printf '%s\t%s\t%s\n' "$took" "$status" "$title" >>"$STEPS"
  printf -- '---- %s: %s in %s\n' "$title" "$status" "$(mmss "$took")"
  return "$rc"
}

# background NAME TITLE COMMAND...: runs COMMAND in its own process group, its output in a log.
background() {
  local name=$1 title=$2
  shift 2
  printf '\n==== started in the background: %s (its output follows when it ends) ====\n' "$title"
  set -m
  "$@" >"$WORK/$name.log" 2>&1 &
  BG_PID[$name]=$!
  set +m
  BG_TITLE[$name]=$title
}

# join NAME: waits for a background job, prints its log, and fails when it failed (nothing
# when it was never started: that is recorded where it was not).
join() {
  local name=$1 rc=0
  [ -n "${BG_PID[$name]:-}" ] || return 0
  wait "${BG_PID[$name]}" || rc=$?
  unset "BG_PID[$name]"
  printf '\n==== the background job: %s ====\n' "${BG_TITLE[$name]}"
  cat "$WORK/$name.log"
  if [ "$rc" -ne 0 ]; then
    printf -- '---- %s: FAILED (exit status %s)\n' "${BG_TITLE[$name]}" "$rc"
    printf '0\tFAILED\t%s (the background job)\n' "${BG_TITLE[$name]}" >>"$STEPS"
    return "$rc"
  fi
}

finish() {
  local rc=$? name
  for name in "${!BG_PID[@]}"; do
    kill -TERM -- "-${BG_PID[$name]}" 2>/dev/null || true
    wait "${BG_PID[$name]}" 2>/dev/null || true
    printf '\n==== the background job: %s (stopped, the run failed) ====\n' "${BG_TITLE[$name]}"
    cat "$WORK/$name.log"
  done
  printf '\n==== time per step (background steps overlap the others) ====\n'
  awk -F'\t' '{ printf "%4d:%02d  %-6s %s\n", int($1 / 60), $1 % 60, ($2 == "ok" ? "ok" : "FAILED"), $3 }' "$STEPS"
  printf '%s in all\n' "$(mmss $((SECONDS - START)))"
  if [ "$rc" -eq 0 ] && grep -q "$(printf '\tFAILED')" "$STEPS"; then
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then
    printf '\n==== all tests passed ====\n'
  else
    printf '\n==== FAILED (exit status %s) ====\n' "$rc"
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap finish EXIT

need_apt=()
command -v promtool >/dev/null || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need_apt+=(prometheus-alertmanager)
command -v tmux >/dev/null || need_apt+=(tmux)
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
install_apt() {
  local SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# The download beside the first build. Whatever else may call apt-get (the background tools
# below) starts only once this has ended: two at once would fight for dpkg's lock.
if ((${#need_apt[@]})); then
  background apt "installing Debian packages: ${need_apt[*]}" \
    step "installing Debian packages: ${need_apt[*]}" install_apt "${need_apt[@]}"
fi
# The Debian prometheus package starts its own daemons on the default ports; the tests start
# their own on free loopback ports and need none of those.

step "the house: code files within 800 code lines, recorded data under data/" bash tests/house.sh

# The lean server, what the container image ships: built as a user's `cargo build` resolves
# features (no dev-dependencies), which tests/lean.sh checks later in the same directory. The
# real-time crashes replay on a copy of it.
LEAN_BIN="$WORK/gpumem-exporter-lean"
build_lean() {
  cargo build --profile "$PROFILE" --no-default-features &&
    cp "$CARGO_TARGET_DIR/$PROFILE/gpumem-exporter" "$LEAN_BIN"
}
lean_built=0
step "cargo build --profile $PROFILE --no-default-features: the lean server, for the real-time crashes" \
  build_lean && lean_built=1
join apt || true

# rustfmt takes seconds of one core: beside the builds, not before the first.
background fmt "cargo fmt --check" step "cargo fmt --check" cargo fmt --all -- --check

# The Python environment of these is one venv, made by the first: one after the other.
export GPUMEM_VENV="${GPUMEM_VENV:-$PWD/.venv-test}"
tools() {
  local rc=0
  step "Python client tests" bash tests/python_client.sh || rc=1
  step "Helm chart tests" bash tests/helm/run.sh || rc=1
  step "promtool: rule files and rule unit tests" bash tests/e2e/run_promtool.sh || rc=1
  step "mixin: rules and dashboards are its render, dashboards lint clean" bash tests/mixin.sh || rc=1
  step "container image (buildah, no daemon)" bash tests/docker_build.sh || rc=1
  return "$rc"
}
background tools "Python client, Helm, promtool, mixin, container image" tools

INCIDENTS="end-to-end: one page per incident, three real crashes replayed in real time (about 7 minutes)"
if [ "$lean_built" = 1 ]; then
  background incidents "$INCIDENTS" step "$INCIDENTS" env GPUMEM_BIN="$LEAN_BIN" python3 tests/e2e/run_incidents.py
else
  printf '0\tFAILED\t%s (not run: no lean server to run it on)\n' "$INCIDENTS" >>"$STEPS"
fi

# The exporter as the tests build it: with the features the dev-dependencies add to shared
# dependencies (`cargo build` alone resolves them without, and every such dependency would be
# built twice). One small test target brings the dev-dependencies in.
build_bin() {
  cargo test --profile "$PROFILE" --no-run --test cli_help &&
    cp "$CARGO_TARGET_DIR/$PROFILE/gpumem-exporter" "$BIN"
}
step "cargo build --profile $PROFILE: the exporter, the dependencies of every test" build_bin
E2E="end-to-end: exporter, Prometheus, Alertmanager"
background e2e "$E2E" step "$E2E" env GPUMEM_BIN="$BIN" python3 tests/e2e/run_e2e.py

step "cargo clippy --all-targets -- -D warnings" \
  cargo clippy --profile "$PROFILE" --all-targets -- -D warnings || true
step "lean server: --no-default-features builds, lints clean, links no charts or terminal UI" \
  env LEAN_TARGET_DIR="$CARGO_TARGET_DIR" LEAN_PROFILE="$PROFILE" bash tests/lean.sh || true
step "cargo test (unit, golden, corpus with every variant, ...)" \
  cargo test --profile "$PROFILE" --all-targets --no-fail-fast || true
step "cargo test --doc" cargo test --profile "$PROFILE" --doc || true
step "top in a real terminal (tmux)" env BIN="$BIN" bash tests/top_tmux.sh || true

join fmt || true
join e2e || true
join tools || true
join incidents || true
