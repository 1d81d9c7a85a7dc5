#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned peers, checks formatting,
# lints and purra-protocol's feature combinations (scripts/check-features.sh), runs every test of
# the workspace (the fuzz corpora replay on stable: crates/purra-fuzz/tests/corpus.rs), the MCP
# conformance suite (scripts/conformance.sh), and the out-of-workspace
# consumer project (consumers/host-smoke): its smoke, the durable-write fault scenarios and the
# crash points.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-peers.sh
cargo fmt --all --check
# The cargo-fuzz crate is outside the workspace; its targets are one line each.
rustfmt --check --edition 2021 fuzz/fuzz_targets/*.rs
cargo clippy --workspace --all-targets -- -D warnings
# purra-protocol's features: a stdio-only server has no HTTP/TLS/WebSocket crate; combinations build.
bash scripts/check-features.sh
cargo test --workspace
cargo build -p purra-conformance --bins
bash scripts/conformance.sh
# The installed-consumer smoke: a separate cargo project depends on the crates as a user would
# (pinned to the workspace's lock), launches a separate stdio server, discovers and calls a tool.
cp Cargo.lock consumers/host-smoke/Cargo.lock
cargo build --quiet --manifest-path consumers/host-smoke/Cargo.toml --target-dir target --bins
target/debug/host-smoke target/debug/purra-example-server
# Durable writes against the independent official-SDK write server, from the same consumer:
# five fault scenarios, then the host killed with SIGKILL at every transition.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/debug/write-acceptance .peers/venv/bin/python peers/python/write_server.py "$work/scenarios"
target/debug/crash-points .peers/venv/bin/python peers/python/write_server.py "$work/crashes"
# Two host processes race to dispatch the same approved intent, 100 rounds, one shared server.
target/debug/dispatch-race target/debug/purra-adapter-fixture "$work/race"
