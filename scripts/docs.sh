#!/usr/bin/env bash
# The documentation people read on docs.rs (run by scripts/test.sh; docs/src/reference/releasing.md):
# 1. every crate to publish takes the workspace's lints, where `missing_docs` is denied, so an
#    undocumented public item fails its build, clippy and this script;
# 2. `cargo doc --workspace --all-features --no-deps` with every rustdoc warning denied (broken
#    and private intra-doc links, bad code blocks, missing docs);
# 3. purra-protocol documented as docs.rs documents it (`--cfg docsrs`, its docs.rs features, the
#    nightly `doc_cfg` that marks what a feature enables, allowed on stable by RUSTC_BOOTSTRAP as
#    docs.rs's nightly allows it, for rustdoc only), and its feature-gated items checked to say
#    their feature.
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. The publishable crates, and the lints each one builds under.
manifests=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        print(p["manifest_path"])')
for manifest in $manifests; do
    if ! grep -Pzq '\n\[lints\]\nworkspace = true\n' "$manifest"; then
        echo "docs: $manifest does not take the workspace's lints ([lints] workspace = true)" >&2
        exit 1
    fi
done
if ! grep -q '^missing_docs = "deny"$' Cargo.toml; then
    echo "docs: the workspace's lints do not deny missing_docs" >&2
    exit 1
fi
echo "docs: $(wc -w <<<"$manifests") crates to publish, each denying missing docs"

# 2. The whole workspace, every feature, warnings denied.
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --locked --workspace --all-features --no-deps
echo "docs: cargo doc --workspace --all-features --no-deps: no warning"

# 3. purra-protocol as docs.rs builds it: items behind a feature name it. RUSTC_BOOTSTRAP reaches
#    rustdoc alone, through a wrapper: build scripts that probe for nightly (proc-macro2's) rerun
#    when it changes, and everything built on them would then compile again, here and in every
#    build after this one that shares the target directory.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec rustdoc "$@"\n' >"$scratch/rustdoc"
chmod +x "$scratch/rustdoc"
RUSTDOC=$scratch/rustdoc RUSTDOCFLAGS="-D warnings --cfg docsrs" \
    cargo doc --quiet --locked -p purra-protocol --features auth --no-deps
marked() { # FILE FEATURE: the page of an item behind FEATURE says so.
    if ! grep -q "Available on <strong>[^.]*crate features\? [^.]*<code>$2</code>" "$1"; then
        echo "docs: $1 does not say it needs the feature $2 (doc_cfg under docsrs)" >&2
        exit 1
    fi
}
marked target/doc/purra_protocol/auth/index.html auth
marked target/doc/purra_protocol/struct.Client.html client
marked target/doc/purra_protocol/http/struct.StreamableHttpServer.html http-server
echo "docs: purra-protocol as docs.rs builds it marks its feature-gated items"
