#!/usr/bin/env bash
# Instructions per read through `purra gateway` over stdio, counted by callgrind (load-independent):
# purra's bench-client drives the gateway (the suite's read configuration: `echo` and `add` bound
# as reads, scope open) in front of purra-bench-server; the gateway runs under callgrind at two
# call counts, and the difference divided by the difference in calls is the marginal cost of one
# read in the gateway process (each count runs that many calls one at a time and again 16 in
# flight; startup, discovery and warm-up cancel out). Needs valgrind and the release builds of
# purra-bench's programs and of `purra`.
#   [PURRA_BIN=path/to/purra] [TAG=name] bench/callgrind-gateway.sh [CALLS_LOW CALLS_HIGH]
#   (default 1000 3000; the profiles are named TAG.N, default gateway.N)
# The profiles stay in target/bench/callgrind/ for callgrind_annotate --inclusive=yes.
set -euo pipefail
cd "$(dirname "$0")/.."
low=${1:-1000}
high=${2:-3000}
out=target/bench/callgrind
tag=${TAG:-gateway}
mkdir -p "$out"
root=$(pwd)
config="$out/gateway.toml"
cat >"$config" <<TOML
[gateway]
name = "bench"
db = "$root/$out/gateway.db"
listen = "stdio"
max_calls_per_minute_per_caller = 60000

[upstreams.bench]
command = ["$root/target/release/purra-bench-server"]

[reads.echo]
upstream = "bench"
title = "Echo"
concurrency = "safe"
scope = "open"

[reads.add]
upstream = "bench"
title = "Add"
concurrency = "safe"
scope = "open"
TOML
total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
for n in "$low" "$high"; do
    rm -f "$out/gateway.db"*
    target/release/bench-client --calls "$n" -- valgrind --tool=callgrind \
        --callgrind-out-file="$out/$tag.$n" ${PURRA_BIN:-target/release/purra} gateway --config "$config" \
        >/dev/null 2>"$out/$tag.$n.log"
done
a=$(total "$out/$tag.$low"); b=$(total "$out/$tag.$high")
echo "gateway: $(( (b - a) / (2 * (high - low)) )) instructions per read"
