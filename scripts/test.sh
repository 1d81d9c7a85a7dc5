#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned peers, checks formatting and
# lints, runs every test of the workspace, the MCP conformance suite (scripts/conformance.sh), and
# the out-of-workspace consumer smoke (consumers/host-smoke).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-peers.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
cargo build -p purra-conformance --bins
bash scripts/conformance.sh
# The installed-consumer smoke: a separate cargo project depends on the crates as a user would
# (pinned to the workspace's lock), launches a separate stdio server, discovers and calls a tool.
cp Cargo.lock consumers/host-smoke/Cargo.lock
cargo run --quiet --manifest-path consumers/host-smoke/Cargo.toml --target-dir target -- target/debug/purra-example-server
