#!/usr/bin/env bash
# The quick loop while changing Rust: formatting, lints and every Rust test (unit, golden, the
# corpus with every variant, doc tests), built once in the `ci` profile of Cargo.toml, as
# tests/all.sh builds them. It leaves out what tests/all.sh adds: the lean build, the Python
# client, Helm, promtool, the mixin, the container image, `top` in tmux and the end-to-end runs
# with Prometheus and Alertmanager. Arguments go to `cargo test`: `tests/quick.sh --test ingest`.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
cargo clippy --profile ci --all-targets -- -D warnings
if (($#)); then
  exec cargo test --profile ci "$@"
fi
cargo test --profile ci --all-targets
cargo test --profile ci --doc
