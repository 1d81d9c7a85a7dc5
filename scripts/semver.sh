#!/usr/bin/env bash
# Semver discipline before a release (docs/src/reference/releasing.md; not part of CI): cargo-semver-checks
# compares the public API of the library crates to publish with a baseline made of the same
# crates as `cargo package` made them at a baseline revision, and fails on any change that needs a
# bigger version bump than the one in the manifests.
#
# Usage: scripts/semver.sh [REV]
#   REV: the baseline's git revision: by default the tag v0.1.0 if there is one (the published
#   0.1.0), else HEAD (what the working tree's changes would need).
# It installs cargo-semver-checks (`cargo install --locked`, about 8.5 minutes on two cores) when
# `cargo semver-checks` is missing. Its builds go to target/semver (1.8 GB).
set -euo pipefail
cd "$(dirname "$0")/.."

root=$PWD
rev=${1:-}
if [[ -z $rev ]]; then
    if git rev-parse -q --verify "refs/tags/v0.1.0" >/dev/null; then rev=v0.1.0; else rev=HEAD; fi
fi
commit=$(git rev-parse --verify "$rev^{commit}")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

if ! cargo semver-checks --version >/dev/null 2>&1; then
    echo "semver: installing cargo-semver-checks" >&2
    cargo install --locked cargo-semver-checks
fi

# The baseline: the crates to publish at REV, packaged and unpacked into a workspace of their own.
mkdir "$scratch/checkout"
git archive "$commit" | tar -x -C "$scratch/checkout"
bash scripts/package.sh --unpack "$scratch/baseline" "$scratch/checkout"

# The current crates against it. purra-cli has no library, and purra-macros is a proc-macro crate
# (its API, the attributes' syntax, is not in rustdoc's JSON): cargo-semver-checks would skip both.
# cargo-semver-checks documents each crate (rustdoc's JSON, with RUSTC_BOOTSTRAP) from a project
# of its own; one target directory for all of them builds their dependencies once, away from the
# workspace's (RUSTC_BOOTSTRAP would make those compile again).
export CARGO_TARGET_DIR=$root/target/semver
echo "semver: the crates to publish, against their packages at $rev ($commit)" >&2
cargo semver-checks check-release --workspace --exclude purra-cli --exclude purra-macros \
    --baseline-root "$scratch/baseline"
