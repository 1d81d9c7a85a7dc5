#!/usr/bin/env bash
# Instructions per stdio round trip, counted by callgrind (load-independent, unlike timings on a
# shared machine): purra's bench-client against purra-bench-server, each under callgrind in turn,
# at two call counts; the difference divided by the difference in calls is the marginal cost of
# one call (each count runs that many calls one at a time and again 16 in flight), startup and
# warm-up cancel out. Needs valgrind and the release build bench/run.sh makes.
#   bench/callgrind.sh [CALLS_LOW CALLS_HIGH]       (default 2000 6000)
# The profiles stay in target/bench/callgrind/ for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
low=${1:-2000}
high=${2:-6000}
out=target/bench/callgrind
mkdir -p "$out"
client=target/release/bench-client
server=target/release/purra-bench-server
cg() { valgrind --tool=callgrind --callgrind-out-file="$1" "${@:2}" >/dev/null 2>"$1.log"; }
total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
for n in "$low" "$high"; do
    "$client" --calls "$n" -- valgrind --tool=callgrind --callgrind-out-file="$out/server.$n" "$server" >/dev/null 2>&1
    cg "$out/client.$n" "$client" --calls "$n" -- "$server"
done
for side in server client; do
    a=$(total "$out/$side.$low"); b=$(total "$out/$side.$high")
    echo "$side: $(( (b - a) / (2 * (high - low)) )) instructions per call"
done
