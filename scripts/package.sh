#!/usr/bin/env bash
# Packages every crate meant for crates.io (each workspace member without `publish = false`) as
# `cargo publish` would, publishes nothing, and shows that a stranger can build on what it made
# (run by scripts/test.sh; docs/src/reference/releasing.md):
# 1. `cargo package --no-verify` of all of them in one run (cargo orders them and resolves each
#    against the others' packages): a crate that cannot be packaged fails here;
# 2. the .crate files unpacked into a workspace of their own (target/packaged) whose
#    `[patch.crates-io]` puts them in crates.io's place, with the repository's lock file (the
#    tested versions of everything else), and consumers/packaged copied in beside them; every
#    purra crate that workspace resolves must be an unpacked one;
# 3. one build of the consumer and the packaged purra-cli together (the packaged sources compile,
#    under their own manifests' lints), then the consumer run: a server and a client over stdio,
#    an agent through purra-mcp, purra-gateway over purra-store, purra-page;
# 4. `cargo install --debug --locked` of the packaged purra-cli and of crates/purra-cli, each
#    into a temporary root, and `purra demo` run by each installed binary (its approved write
#    sent once, then answered from the store).
# The builds share the workspace's target directory, so what the tests built is reused where the
# features agree. It ends by saying how long each step took.
#
# `scripts/package.sh --unpack DIR [CHECKOUT]` does steps 1 and 2 alone for CHECKOUT (default
# this one) into DIR (replaced), without the consumer, each package's dependencies on the others
# given their paths: scripts/semver.sh's baseline.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$PWD
packaged=$root/target/packaged
source=$root
unpack_only=false
if [[ ${1:-} == --unpack ]]; then
    unpack_only=true
    packaged=$(realpath -m "${2:?--unpack DIR [CHECKOUT]}")
    source=$(realpath "${3:-$root}")
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export CARGO_TARGET_DIR=$root/target
# The packaged crates are compiled afresh from their unpacked sources: incremental compilation's
# caches would only take disk (about 650 MB more per run, measured).
export CARGO_INCREMENTAL=0

timings=()
timed() {
    local label=$1 t0=$SECONDS
    shift
    "$@"
    timings+=("$label: $((SECONDS - t0)) s")
}

# The crates to publish, with their versions: "name version" lines.
cd "$source"
publishable=$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        print(p["name"], p["version"])')
names=$(cut -d" " -f1 <<<"$publishable")
echo "package: the crates to publish:" $names

# 1. Package them (what `cargo publish --dry-run` checks, without verifying each crate by a build
#    of its own: step 3 builds them all at once).
package_args=()
for name in $names; do package_args+=(-p "$name"); done
# Another checkout's packages go to a directory of their own (they have the same names).
crates=$root/target/package
[[ $source == "$root" ]] || crates=$scratch/package-target/package
timed "cargo package" cargo package --locked --no-verify --allow-dirty \
    --target-dir "$(dirname "$crates")" "${package_args[@]}"

# 2. A workspace of the unpacked packages and the consumer.
rm -rf "$packaged"
mkdir -p "$packaged"
members=()
patch=""
while read -r name version; do
    # `cargo package` writes every file with one fixed old mtime; extracted as is, a target/ that
    # built an earlier package at this path would look up to date and the old code would be used.
    # Touched on extraction (-m), the packages always build from what was just packaged.
    tar -xzmf "$crates/$name-$version.crate" -C "$packaged"
    mv "$packaged/$name-$version" "$packaged/$name"
    members+=("\"$name\"")
    patch+="$name = { path = \"$name\" }"$'\n'
done <<<"$publishable"
if ! $unpack_only; then
    mkdir "$packaged/packaged-smoke"
    cp -r consumers/packaged/Cargo.toml consumers/packaged/src "$packaged/packaged-smoke/"
    members+=("\"packaged-smoke\"")
fi
# (The baseline links its packages by path instead: below.)
$unpack_only && patch="" || patch="# In crates.io's place."$'\n'"[patch.crates-io]"$'\n'"$patch"
cat >"$packaged/Cargo.toml" <<EOF
# Written by scripts/package.sh: the crates as \`cargo package\` made them.
[workspace]
resolver = "2"
members = [$(IFS=,; echo "${members[*]}")]

$patch
# The repository's dev profile, as the tests build with it.
[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false
EOF
cp Cargo.lock "$packaged/Cargo.lock"
if $unpack_only; then
    # cargo-semver-checks documents each crate from a project of its own that depends on it by
    # path, where a workspace's [patch] does not reach: each unpacked manifest's dependency on
    # another published crate gets the path of its unpacked package beside its version, as in the
    # repository's manifests.
    python3 - "$packaged" $names <<'PY'
import pathlib, re, sys
packaged, names = pathlib.Path(sys.argv[1]), set(sys.argv[2:])
for name in names:
    manifest = packaged / name / "Cargo.toml"
    def with_path(m):
        return m.group(0) + 'path = "../%s"\n' % m.group(1) if m.group(1) in names else m.group(0)
    text = re.sub(r'^\[(?:.+\.)?(?:dev-|build-)?dependencies\.([A-Za-z0-9_-]+)\]\n', with_path,
                  manifest.read_text(), flags=re.M)
    manifest.write_text(text)
PY
fi
cd "$root"
# Every purra crate resolved there is an unpacked package, none the repository's own sources.
cargo metadata --format-version 1 --manifest-path "$packaged/Cargo.toml" | python3 -c '
import json, os, sys
packaged = sys.argv[1]
meta = json.load(sys.stdin)
purra = [p for p in meta["packages"] if p["name"].startswith("purra-")]
outside = [p["manifest_path"] for p in purra if not p["manifest_path"].startswith(packaged + os.sep)]
if outside or not purra:
    sys.exit("package: purra crates resolved outside the unpacked packages: %s" % (outside or "none found"))
print("package: %d purra crates, all from the packages" % len(purra))' "$packaged"
if $unpack_only; then
    echo "package: $(wc -l <<<"$publishable") crates of $source unpacked into $packaged"
    exit 0
fi

# 3. Build the consumer and the CLI from the packages; run the consumer.
timed "build from the packages" cargo build --manifest-path "$packaged/Cargo.toml" \
    -p packaged-smoke -p purra-cli
timed "the consumer" "$CARGO_TARGET_DIR/debug/packaged-smoke"

# 4. Install purra from the package and from the repository; each runs the demo.
demo() {
    local purra=$1 db=$2 out
    out=$("$purra" demo --db "$db" 2>&1) || { echo "$out" >&2; echo "package: $purra demo failed" >&2; return 1; }
    if ! grep -q "^sent once: " <<<"$out" || ! grep -q "^server: write requests this server process received = 1$" <<<"$out"; then
        echo "$out" >&2
        echo "package: $purra demo did not send its approved write once" >&2
        return 1
    fi
    echo "package: $(basename "$(dirname "$(dirname "$purra")")")/bin/purra demo: its approved write sent once"
}
timed "cargo install (packaged purra-cli)" cargo install --quiet --debug --locked \
    --path "$packaged/purra-cli" --root "$scratch/from-package"
timed "demo (packaged)" demo "$scratch/from-package/bin/purra" "$scratch/from-package.db"
timed "cargo install --path crates/purra-cli" cargo install --quiet --debug --locked \
    --path crates/purra-cli --root "$scratch/from-path"
timed "demo (path)" demo "$scratch/from-path/bin/purra" "$scratch/from-path.db"

echo "package: every crate packages; the consumer and purra demo ran from the packages" >&2
printf '  %s\n' "${timings[@]}" >&2
