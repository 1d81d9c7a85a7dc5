#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned peers, checks formatting,
# lints and purra-protocol's feature combinations (scripts/check-features.sh), runs every test of
# the workspace (the fuzz corpora replay on stable: crates/purra-fuzz/tests/it/corpus.rs; among them
# purra-examples' skills interop test, which builds the rmcp 3.11.0 skills peer
# consumers/rmcp-skills into target/rmcp-skills, about a minute the first time), the MCP
# conformance suite (scripts/conformance.sh), and the out-of-workspace
# consumer project (consumers/host-smoke): its smoke, the durable-write fault scenarios and the
# crash points, on SQLite and on PostgreSQL, and PostgreSQL's own faults; then the docs as docs.rs
# builds them, warnings denied (scripts/docs.sh), the user guide built with its links checked
# (scripts/guide.sh), and every published crate packaged with a
# consumer and `purra demo` built from the packages (scripts/package.sh). It ends by saying how
# long the PostgreSQL parts and the last three took.
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs a command and records how long it took under a label (printed at the end).
timings=()
timed() {
    local label=$1 t0=$SECONDS
    shift
    "$@"
    timings+=("$label: $((SECONDS - t0)) s")
}

# CI builds everything once from a clean checkout: incremental compilation's caches would only
# take disk (gigabytes, on a machine whose disk is not large).
export CARGO_INCREMENTAL=0
bash scripts/setup-peers.sh
# One PostgreSQL server for the whole run (purra-postgres's tests, the CLI's and the consumer's
# PostgreSQL scenarios find it through PURRA_TEST_POSTGRES); stopped and removed at the end, also
# on failure.
work=$(mktemp -d)
pgdir=$(mktemp -d)
cleanup() {
    bash scripts/postgres.sh stop "$pgdir" || true
    rm -rf "$work" "$pgdir"
}
trap cleanup EXIT
eval "$(bash scripts/postgres.sh start "$pgdir")"
cargo fmt --all --check
# The cargo-fuzz crate is outside the workspace; its targets are one line each.
rustfmt --check --edition 2021 fuzz/fuzz_targets/*.rs
cargo clippy --workspace --all-targets -- -D warnings
# purra-protocol's features: a stdio-only server has no HTTP/TLS/WebSocket crate; combinations build.
bash scripts/check-features.sh
# The log is kept to report how long purra-postgres's integration tests (tests/it: the contract
# suite, most of it, and a migration) took; the CLI's PostgreSQL tests (the demo and the store
# subcommands on a postgres:// URL) run inside purra-cli's tests/durable.rs.
cargo test --workspace 2>&1 | tee "$work/cargo-test.log"
# (every crate's binary is tests/it/main.rs: the one after purra-postgres's unit tests is meant.)
timings+=("purra-postgres contract suite: $(awk '/deps\/purra_postgres-/ { crate = 1 }
    crate && /Running tests\/it\/main.rs/ { on = 1 }
    on && /^test result:/ { print $NF; exit }' "$work/cargo-test.log")")
cargo build -p purra-conformance --bins
bash scripts/conformance.sh
# The installed-consumer smoke: a separate cargo project depends on the crates as a user would
# (pinned to the workspace's lock), launches a separate stdio server, discovers and calls a tool.
cp Cargo.lock consumers/host-smoke/Cargo.lock
cargo build --quiet --manifest-path consumers/host-smoke/Cargo.toml --target-dir target --bins
target/debug/host-smoke target/debug/purra-example-server
# Durable writes against the independent official-SDK write server, from the same consumer:
# five fault scenarios, then the host killed with SIGKILL at every transition.
target/debug/write-acceptance .peers/venv/bin/python peers/python/write_server.py "$work/scenarios"
target/debug/crash-points .peers/venv/bin/python peers/python/write_server.py "$work/crashes"
# Two host processes race to dispatch the same approved intent, 100 rounds, one shared server.
target/debug/dispatch-race target/debug/purra-adapter-fixture "$work/race"
# The same three with PostgreSQL as the store (a fresh schema per scenario, one server).
timed "write-acceptance on PostgreSQL" target/debug/write-acceptance --db "$PURRA_TEST_POSTGRES" \
    .peers/venv/bin/python peers/python/write_server.py "$work/pg-scenarios"
timed "crash-points on PostgreSQL" target/debug/crash-points --db "$PURRA_TEST_POSTGRES" \
    .peers/venv/bin/python peers/python/write_server.py "$work/pg-crashes"
timed "dispatch-race on PostgreSQL" target/debug/dispatch-race --db "$PURRA_TEST_POSTGRES" \
    target/debug/purra-adapter-fixture "$work/pg-race"
# PostgreSQL's own faults: restarted (fast) after the claim and after the send, the claim's commit
# acknowledgement cut, a partition longer than the lease.
timed "pg-faults" target/debug/pg-faults --db "$PURRA_TEST_POSTGRES" --ctl "$PURRA_TEST_POSTGRES_CTL" \
    .peers/venv/bin/python peers/python/write_server.py "$work/pg-faults"
# What people read on docs.rs, and what they would download from crates.io.
timed "docs" bash scripts/docs.sh
# The user guide (docs/, an mdBook): built, its links and images resolved.
timed "guide" bash scripts/guide.sh
timed "package" bash scripts/package.sh
echo "test.sh: the PostgreSQL parts, the docs, the guide and the packages took:" >&2
printf '  %s\n' "${timings[@]}" >&2
echo "test.sh: target/ holds $(du -sh target | cut -f1)" >&2
