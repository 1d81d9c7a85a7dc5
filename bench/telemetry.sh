#!/usr/bin/env bash
# What purra-protocol's `otel` feature costs when it is on and nothing exports: the stdio and
# Streamable HTTP round trips of purra's benchmark programs (bench-client against
# purra-bench-server over stdio; http-load against purra-bench-server --http), built in release
# without the feature and with it, side by side in interleaved rounds; medians and the ratio
# on ÷ off. No subscriber is installed on either side, as in a library built with the feature
# whose application configured no telemetry.
#   bench/telemetry.sh [--rounds R] [--calls N] [--http-calls N] [--instructions]
# --instructions counts instead of timing: the server's instructions per call under callgrind (the
# marginal cost between 1 000 and 3 000 calls, so start-up cancels out; one tokio worker thread),
# which a loaded machine does not move; needs valgrind.
# Never run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 calls=20000 http_calls=5000 instructions=
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --calls) calls=$2; shift 2 ;;
        --http-calls) http_calls=$2; shift 2 ;;
        --instructions) instructions=1; shift ;;
        *) echo "usage: bench/telemetry.sh [--rounds R] [--calls N] [--http-calls N] [--instructions]" >&2; exit 64 ;;
    esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# One target directory for both builds (only purra-protocol and what uses it are rebuilt); each
# build's binaries are copied out before the next.
for side in off on; do
    features=()
    [[ $side == on ]] && features=(--features otel)
    cargo build --release --quiet -p purra-bench "${features[@]}" \
        --bin bench-client --bin http-load --bin purra-bench-server
    mkdir -p "$out/$side"
    cp target/release/{bench-client,http-load,purra-bench-server} "$out/$side/"
done

field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_http() {
    port=$(free_port)
    "$out/$1/purra-bench-server" --http "$port" 2>/dev/null &
    server_pid=$!
    for _ in $(seq 1 200); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "telemetry.sh: the $1 server did not start" >&2
    exit 1
}
stop_http() {
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}

if [[ -n $instructions ]]; then
    # Instructions the server ran for N calls: `cg SIDE stdio|http N`.
    cg() {
        local side=$1 kind=$2 n=$3 prof="$out/cg.$RANDOM"
        if [[ $kind == stdio ]]; then
            printf '#!/bin/sh\nTOKIO_WORKER_THREADS=1 exec valgrind --tool=callgrind --callgrind-out-file=%s %s 2>/dev/null\n' \
                "$prof" "$out/$side/purra-bench-server" >"$out/wrap.sh"
            chmod +x "$out/wrap.sh"
            "$out/$side/bench-client" --calls "$n" -- "$out/wrap.sh" >/dev/null
        else
            port=$(free_port)
            TOKIO_WORKER_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$prof" \
                "$out/$side/purra-bench-server" --http "$port" 2>/dev/null &
            server_pid=$!
            for _ in $(seq 1 600); do
                python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
                sleep 0.1
            done
            "$out/$side/http-load" --url "http://127.0.0.1:$port/mcp" --clients 1 --calls "$n" >/dev/null
            # Callgrind writes its profile when the process ends, also by a signal.
            kill -TERM "$server_pid" 2>/dev/null || true
            wait "$server_pid" 2>/dev/null || true
        fi
        sleep 0.5
        grep -m1 '^summary:\|^totals:' "$prof" | awk '{ print $2 }'
    }
    # Marginal instructions per call: (I(3000) - I(1000)) / 2000 / calls per N (bench-client
    # makes each call twice: sequential, then 16 in flight).
    per_call() {
        local lo hi
        lo=$(cg "$1" "$2" 1000)
        hi=$(cg "$1" "$2" 3000)
        echo $(( (hi - lo) / (2000 * $3) ))
    }
    echo "| server instructions per call | otel off | otel on, no exporter | on ÷ off |"
    echo "|---|---:|---:|---:|"
    for spec in "stdio echo:stdio:2" "HTTP add, 1 session:http:1"; do
        IFS=: read -r label kind per <<<"$spec"
        o=$(per_call off "$kind" "$per")
        n=$(per_call on "$kind" "$per")
        awk -v l="$label" -v o="$o" -v n="$n" 'BEGIN { printf "| %s | %d | %d | %.3f |\n", l, o, n, n / o }'
    done
    exit 0
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$rounds"); do
    echo "round $r of $rounds (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if (( r % 2 )); then sides="off on"; else sides="on off"; fi
    for side in $sides; do
        line=$("$out/$side/bench-client" --calls "$calls" -- "$out/$side/purra-bench-server")
        echo "$(field "$line" sequential_calls_per_s) $(field "$line" p50_us) $(field "$line" concurrent_calls_per_s)" \
            >>"$out/stdio-$side"
        start_http "$side"
        for k in 1 16; do
            line=$("$out/$side/http-load" --url "http://127.0.0.1:$port/mcp" --clients "$k" --calls "$http_calls")
            echo "$(field "$line" calls_per_s) $(field "$line" p50_us)" >>"$out/http$k-$side"
        done
        stop_http
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f–%.0f", v[1], v[NR] }'; }
row() {
    local label=$1 file=$2 col=$3 o n
    o=$(median "$out/$file-off" "$col")
    n=$(median "$out/$file-on" "$col")
    awk -v l="$label" -v o="$o" -v n="$n" -v so="$(spread "$out/$file-off" "$col")" -v sn="$(spread "$out/$file-on" "$col")" \
        'BEGIN { printf "| %s | %.0f (%s) | %.0f (%s) | %.3f |\n", l, o, so, n, sn, n / o }'
}
echo "$(git rev-parse --short HEAD)$(git diff --quiet || echo ' + working tree'), $rounds rounds, medians (range):"
echo "| round trip | otel off | otel on, no exporter | on ÷ off |"
echo "|---|---:|---:|---:|"
row "stdio, one at a time (calls/s)" stdio 1
row "stdio, one at a time (p50 µs)" stdio 2
row "stdio, 16 in flight (calls/s)" stdio 3
row "HTTP, 1 session (calls/s)" http1 1
row "HTTP, 1 session (p50 µs)" http1 2
row "HTTP, 16 sessions (calls/s)" http16 1
row "HTTP, 16 sessions (p50 µs)" http16 2
