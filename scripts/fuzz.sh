#!/usr/bin/env bash
# Runs the cargo-fuzz targets (fuzz/fuzz_targets) on nightly:
# `scripts/fuzz.sh TARGET|all|"T1 T2 ..." SECONDS [RUNS]`.
# Each target runs alone (one libFuzzer process, its output in its own log, so two invocations
# can run side by side) for SECONDS (or until RUNS executions, when
# given: with a long SECONDS, a run of a fixed number of executions), niced so other work keeps
# priority, starting from the committed seeds (fuzz/corpus/TARGET, read only) and the working
# corpus of earlier runs (fuzz/work/TARGET, git-ignored, where new inputs go). A crash, a timeout
# (10 s per input) or a leak stops the target and is saved under fuzz/artifacts/TARGET; the
# script exits non-zero if any target found one. Add a fixed crash's input to fuzz/corpus/TARGET:
# the stable replay test (crates/purra-fuzz/tests/it/corpus.rs) then runs it in CI.
# Needs `cargo install cargo-fuzz` and a nightly toolchain.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

if [[ $# -ne 2 && $# -ne 3 ]]; then
    echo "usage: scripts/fuzz.sh TARGET|all|\"T1 T2 ...\" SECONDS [RUNS]" >&2
    exit 2
fi
target=$1
seconds=$2
runs=()
if [[ $# -eq 3 ]]; then
    runs=(-runs="$3")
fi
if [[ $target == all ]]; then
    targets=$(ls fuzz_targets | sed 's/\.rs$//')
else
    targets=$target
fi

nice -n 15 cargo +nightly fuzz build
failed=()
for t in $targets; do
    mkdir -p "work/$t" "artifacts/$t"
    log=$(mktemp)
    echo "== $t: $seconds s${runs[*]:+, ${runs[*]}}"
    if ! nice -n 15 cargo +nightly fuzz run "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$seconds" "${runs[@]}" -timeout=10 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        failed+=("$t")
    fi
    grep -E '^#[0-9]+' "$log" | tail -n 1 || true
    grep -E 'ERROR|SUMMARY|panicked|Test unit written' "$log" || true
    # The artifacts tell too (a crash, timeout, leak or out-of-memory input).
    if ls "artifacts/$t" | grep -qE '^(crash|timeout|leak|oom)-'; then
        [[ " ${failed[*]-} " == *" $t "* ]] || failed+=("$t")
    fi
    cp "$log" "artifacts/$t/last-run.log"
    rm -f "$log"
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: found something in: ${failed[*]} (see fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz: no crash, timeout or leak in: $(echo $targets)"
