#!/usr/bin/env bash
# The stdio round trip against the serde floor in each placement of the two processes, pinned with
# taskset so that no round falls in the other mode: `same` (client and server share one CPU: no
# wake-up crosses CPUs, CPU work decides), `split` (client on CPU 0, server on CPU 1: every
# round trip wakes the other CPU, whose idle wake-up decides) and `free` (unpinned, the suite's
# placement, which falls in either mode from run to run). In every round the serde floor
# (`floor client --json --tokio --mt` / `floor server --json --tokio`) and purra (`bench-client` /
# `purra-bench-server`) run back to back; each line prints that round's ratios, sequential and
# 16 in flight, and the p50s. Needs the release builds bench/run.sh makes and a 2-CPU machine.
#   bench/placement.sh [ROUNDS [CALLS]]       (default 5 rounds of 20000 calls)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
calls=${2:-20000}
bin=target/release
# pin SPEC COMMAND...: COMMAND on the CPUs in SPEC ("-" leaves it free).
pin() {
    local spec=$1
    shift
    if [ "$spec" = - ]; then "$@"; else taskset -c "$spec" "$@"; fi
}
# pair CLIENT_CPUS SERVER_CPUS: one floor run, then one purra run, and their ratios.
pair() {
    local floor purra
    floor=$(pin "$1" "$bin/floor" client --json --tokio --mt --calls "$calls" -- \
        $( [ "$2" = - ] || echo taskset -c "$2") "$bin/floor" server --json --tokio)
    purra=$(pin "$1" "$bin/bench-client" --calls "$calls" -- \
        $( [ "$2" = - ] || echo taskset -c "$2") "$bin/purra-bench-server")
    python3 - "$floor" "$purra" <<'PY'
import json, sys
f, p = (json.loads(a) for a in sys.argv[1:3])
seq, conc = "sequential_calls_per_s", "concurrent_calls_per_s"
print(f"floor {f[seq]:7.0f}/s {f[conc]:7.0f}/s p50 {f['p50_us']:3.0f} us | "
      f"purra {p[seq]:7.0f}/s {p[conc]:7.0f}/s p50 {p['p50_us']:3.0f} us | "
      f"ratio sequential {p[seq] / f[seq]:.2f}, 16 in flight {p[conc] / f[conc]:.2f}")
PY
}
for placement in same split free; do
    echo "$placement:"
    for _ in $(seq "$rounds"); do
        case $placement in
            same) pair 0 0 ;;
            split) pair 0 1 ;;
            free) pair - - ;;
        esac
    done
done
