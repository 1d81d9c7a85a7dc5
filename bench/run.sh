#!/usr/bin/env bash
# The side-by-side benchmark suite, one command: installs the pinned peers (scripts/setup-peers.sh
# --bench: also the proxies the gateway is compared with, and HAProxy), builds purra's benchmark
# programs, the `purra` binary and the rmcp 3.11.0 peers (bench/peers-rs, a separate cargo project
# that the workspace and CI never build) in release mode, starts a throw-away PostgreSQL server
# for the gateway's rows (scripts/postgres.sh; stopped at the end), and runs bench-suite from the
# repository root: every pair in interleaved rounds, every answer checked; it prints the tables
# and rewrites the suite's part of BENCHMARKS.md and bench/charts/*.svg. Arguments go to
# bench-suite:
#   bench/run.sh [--rounds R] [--calls N] [--http-calls N] [--quick] [--memory] [--gateway] [--upstream]
#   [--scale-postgres] (the store-at-scale rows on PostgreSQL: store-scale also reads PURRA_BENCH_POSTGRES, set below, so under this script they are measured either way)
# Benchmarks never run in CI. Run it on a quiet machine (the load average is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-peers.sh --bench >/dev/null
# The server without JSON Schema validation first (the memory table's feature-equal row), then
# everything with purra's default features.
cargo build --release --quiet -p purra-bench --bin purra-bench-server --no-default-features
cp target/release/purra-bench-server target/release/purra-bench-server-novalidation
cargo build --release --quiet -p purra-bench --bins
cargo build --release --quiet -p purra-cli --bin purra
cargo build --release --quiet --manifest-path bench/peers-rs/Cargo.toml --target-dir target
pgdir=$(mktemp -d)
cleanup() {
    bash scripts/postgres.sh stop "$pgdir" >/dev/null 2>&1 || true
    rm -rf "$pgdir"
}
trap cleanup EXIT
# Without a server the gateway's PostgreSQL rows read FAILED (and the suite exits 1).
if pgenv=$(bash scripts/postgres.sh start "$pgdir" 2>/dev/null); then
    eval "$pgenv"
else
    echo "bench/run.sh: PostgreSQL did not start; its rows will read FAILED" >&2
fi
PURRA_BENCH_POSTGRES=${PURRA_TEST_POSTGRES:-} target/release/bench-suite "$@"
