#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned peers, checks formatting and
# lints, runs every test of the workspace, then the MCP conformance suite (scripts/conformance.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-peers.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
cargo build -p purra-conformance --bins
bash scripts/conformance.sh
