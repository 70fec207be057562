#!/usr/bin/env bash
# Every test of the project, on a fresh Debian machine: installs what it needs, then runs the
# Rust checks and tests, the Python client's tests, the chart tests, the rule tests and the
# end-to-end check with real Prometheus and Alertmanager. Any failure fails the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==== %s ====\n' "$*"; }

need_apt=()
command -v promtool >/dev/null || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need_apt+=(prometheus-alertmanager)
command -v tmux >/dev/null || need_apt+=(tmux)
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  step "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# The Debian prometheus package starts its own daemons on the default ports; the tests start
# their own on free loopback ports and need none of those.

step "the house: code files within 800 code lines, recorded data under data/"
bash tests/house.sh
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "lean server: --no-default-features builds, lints clean, links no charts or terminal UI"
bash tests/lean.sh
step "cargo test"
cargo test --all-targets
step "cargo test --doc"
cargo test --doc

export GPUMEM_VENV="${GPUMEM_VENV:-$PWD/.venv-test}"
step "Python client tests"
bash tests/python_client.sh
step "Helm chart tests"
bash tests/helm/run.sh
step "container image (buildah, no daemon)"
bash tests/docker_build.sh
step "promtool: rule files and rule unit tests"
bash tests/e2e/run_promtool.sh
step "mixin: rules and dashboards are its render, dashboards lint clean"
bash tests/mixin.sh
step "top in a real terminal (tmux)"
bash tests/top_tmux.sh
step "end-to-end: exporter, Prometheus, Alertmanager"
cargo build --quiet
GPUMEM_BIN="$PWD/target/debug/gpumem-exporter" python3 tests/e2e/run_e2e.py
step "end-to-end: one page per incident, three real crashes replayed in real time (about 7 minutes)"
GPUMEM_BIN="$PWD/target/debug/gpumem-exporter" python3 tests/e2e/run_incidents.py

step "all tests passed"
