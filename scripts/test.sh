#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs the pinned peers, checks formatting and
# lints, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-peers.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
