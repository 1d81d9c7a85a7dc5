#!/usr/bin/env bash
# The side-by-side benchmark suite, one command: installs the pinned peers (scripts/setup-peers.sh),
# builds purra's benchmark programs and the rmcp 3.11.0 peers (bench/peers-rs, a separate cargo
# project that the workspace and CI never build) in release mode, then runs bench-suite from the
# repository root: every pair in interleaved rounds, every answer checked; it prints the tables and
# rewrites the suite's part of BENCHMARKS.md and bench/charts/*.svg. Arguments go to bench-suite:
#   bench/run.sh [--rounds R] [--calls N] [--http-calls N] [--quick] [--memory]
# Benchmarks never run in CI. Run it on a quiet machine (the load average is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-peers.sh >/dev/null
# The server without JSON Schema validation first (the memory table's feature-equal row), then
# everything with purra's default features.
cargo build --release --quiet -p purra-bench --bin purra-bench-server --no-default-features
cp target/release/purra-bench-server target/release/purra-bench-server-novalidation
cargo build --release --quiet -p purra-bench --bins
cargo build --release --quiet --manifest-path bench/peers-rs/Cargo.toml --target-dir target
exec target/release/bench-suite "$@"
