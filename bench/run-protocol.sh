#!/usr/bin/env bash
# Protocol round trips over real stdio pipes, purra beside the official TypeScript SDK 1.32.2:
# every client against every server, `echo` calls sequentially and 16 in flight; prints the
# JSON lines and the purra/TypeScript ratios. Needs scripts/setup-peers.sh and a release build:
#   cargo build --release -p purra-bench --bin stdio-echo -p purra-examples --bin purra-example-server
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-20000}
purra_server=target/release/purra-example-server
node=.peers/bin/node
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
pp=$(target/release/stdio-echo --calls "$CALLS" -- "$purra_server")
pt=$(target/release/stdio-echo --calls "$CALLS" -- "$node" peers/node/server.mjs)
tt=$("$node" peers/node/bench_client.mjs --calls "$CALLS" -- "$node" peers/node/server.mjs)
tp=$("$node" peers/node/bench_client.mjs --calls "$CALLS" -- "$purra_server")
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'purra client -> purra server: %s\npurra client -> TS server:    %s\nTS client -> TS server:       %s\nTS client -> purra server:    %s\n' "$pp" "$pt" "$tt" "$tp"
field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "ratio purra/TS (both ends), sequential: $(ratio "$(field "$pp" sequential_calls_per_s)" "$(field "$tt" sequential_calls_per_s)")"
echo "ratio purra/TS (both ends), 16 in flight: $(ratio "$(field "$pp" concurrent_calls_per_s)" "$(field "$tt" concurrent_calls_per_s)")"
