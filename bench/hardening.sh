#!/usr/bin/env bash
# What the hardening cost: purra's stdio and Streamable HTTP round trips at a baseline commit
# (default c2f7b53, main before the second wave: no input bounds beyond the line limit, no
# connection limits, no hostile-peer defences) beside the working tree, both built in release.
#   bench/hardening.sh [--rounds R] [--calls N] [--http-calls N] [--tree DIR] [--instructions] [BASE]
# (--tree: an existing checkout of BASE to build, instead of a temporary worktree.)
# --instructions counts instead of timing: the server's instructions per call under callgrind (the
# marginal cost between 1 000 and 3 000 calls, so start-up cancels out), on one tokio worker thread
# (with two, scheduling alone moves the count by ~5 % between runs); needs valgrind.
# The same program serves on both sides (purra-example-server, the fixture surface); stdio is
# measured with each side's own client (the baseline's stdio-echo, today's bench-client: the
# same echo calls, sequential and 16 in flight), HTTP with one raw client for both (http-load:
# the same bytes, 1 and 16 sessions), so client and server hardening both count. Rounds are
# interleaved; medians and the ratio today ÷ baseline are printed. Never run in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 calls=20000 http_calls=5000 base=c2f7b53 tree= instructions=
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --calls) calls=$2; shift 2 ;;
        --http-calls) http_calls=$2; shift 2 ;;
        --tree) tree=$2; shift 2 ;;
        --instructions) instructions=1; shift ;;
        -*) echo "usage: bench/hardening.sh [--rounds R] [--calls N] [--http-calls N] [--tree DIR] [--instructions] [BASE]" >&2; exit 64 ;;
        *) base=$1; shift ;;
    esac
done
root=$PWD
out=$(mktemp -d)
own_tree=
if [[ -z $tree ]]; then
    tree=$(mktemp -d)
    own_tree=1
    git worktree add --detach --quiet "$tree" "$base"
elif [[ $(git -C "$tree" rev-parse HEAD) != $(git rev-parse "$base^{commit}") ]]; then
    echo "hardening.sh: $tree is not at $base" >&2
    exit 64
fi
cleanup() {
    if [[ -n $own_tree ]]; then
        git -C "$root" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    fi
    rm -rf "$out"
}
trap cleanup EXIT
# The baseline builds in its own target directory so its binaries never replace today's.
(cd "$tree" && cargo build --release --quiet --target-dir "$root/target/baseline" \
    -p purra-bench --bin stdio-echo -p purra-examples --bin purra-example-server)
cargo build --release --quiet -p purra-bench --bin bench-client --bin http-load \
    -p purra-examples --bin purra-example-server
old=target/baseline/release new=target/release

# Starts `$1/purra-example-server --http 127.0.0.1:0`, sets $server_pid and $url.
start_http() {
    "$1/purra-example-server" --http 127.0.0.1:0 2>"$out/server.err" &
    server_pid=$!
    for _ in $(seq 1 200); do
        url=$(sed -nE 's|^listening on (http:[^ ]+/mcp)$|\1|p' "$out/server.err")
        [[ -n $url ]] && return 0
        sleep 0.05
    done
    echo "hardening.sh: the $1 server did not start" >&2
    exit 1
}
stop_http() {
    kill -INT "$server_pid"
    wait "$server_pid" || true
}
field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }

if [[ -n $instructions ]]; then
    # Instructions the server ran for $3 calls: `cg SIDE-DIR CLIENT-KIND N [CLIENTS]`.
    cg() {
        local dir=$1 kind=$2 n=$3 k=${4:-1} prof="$out/cg.$RANDOM"
        if [[ $kind == stdio ]]; then
            printf '#!/bin/sh\nTOKIO_WORKER_THREADS=1 exec valgrind --tool=callgrind --callgrind-out-file=%s %s 2>/dev/null\n' \
                "$prof" "$root/$dir/purra-example-server" >"$out/wrap.sh"
            chmod +x "$out/wrap.sh"
            if [[ $dir == "$old" ]]; then
                "$old/stdio-echo" --calls "$n" -- "$out/wrap.sh" >/dev/null
            else
                "$new/bench-client" --calls "$n" -- "$out/wrap.sh" >/dev/null
            fi
        else
            TOKIO_WORKER_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$prof" \
                "$dir/purra-example-server" --http 127.0.0.1:0 2>"$out/server.err" &
            server_pid=$!
            url=
            for _ in $(seq 1 600); do
                url=$(sed -nE 's|^listening on (http:[^ ]+/mcp)$|\1|p' "$out/server.err")
                [[ -n $url ]] && break
                sleep 0.1
            done
            "$new/http-load" --url "$url" --clients "$k" --calls "$n" >/dev/null
            stop_http
        fi
        sleep 0.5
        grep -m1 '^summary:\|^totals:' "$prof" | awk '{ print $2 }'
    }
    # Marginal instructions per call: (I(3N) - I(N)) / 2N; a stdio run makes each call twice
    # (sequential, then 16 in flight).
    per_call() {
        local lo hi calls_per=$3
        lo=$(cg "$1" "$2" 1000 "${4:-1}")
        hi=$(cg "$1" "$2" 3000 "${4:-1}")
        echo $(( (hi - lo) / (2000 * calls_per) ))
    }
    echo "| server instructions per call | baseline | today | today ÷ baseline |"
    echo "|---|---:|---:|---:|"
    for spec in "stdio echo:stdio:2:1" "HTTP add, 1 session:http:1:1" "HTTP add, 16 sessions:http:1:16"; do
        IFS=: read -r label kind per k <<<"$spec"
        b=$(per_call "$old" "$kind" "$per" "$k")
        t=$(per_call "$new" "$kind" "$per" "$k")
        awk -v l="$label" -v b="$b" -v t="$t" 'BEGIN { printf "| %s | %d | %d | %.3f |\n", l, b, t, t / b }'
    done
    exit 0
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$rounds"); do
    echo "round $r of $rounds (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    # Alternate which side goes first.
    if (( r % 2 )); then sides="baseline today"; else sides="today baseline"; fi
    for side in $sides; do
        if [[ $side == baseline ]]; then
            line=$("$old/stdio-echo" --calls "$calls" -- "$old/purra-example-server")
            dir=$old
        else
            line=$("$new/bench-client" --calls "$calls" -- "$new/purra-example-server")
            dir=$new
        fi
        echo "$(field "$line" sequential_calls_per_s) $(field "$line" p50_us) $(field "$line" concurrent_calls_per_s)" \
            >>"$out/stdio-$side"
        start_http "$dir"
        for k in 1 16; do
            line=$("$new/http-load" --url "$url" --clients "$k" --calls "$http_calls")
            echo "$(field "$line" calls_per_s) $(field "$line" p50_us)" >>"$out/http$k-$side"
        done
        stop_http
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Median of column $2 of file $1.
median() { awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
row() {
    local label=$1 file=$2 col=$3
    local b t
    b=$(median "$out/$file-baseline" "$col")
    t=$(median "$out/$file-today" "$col")
    awk -v l="$label" -v b="$b" -v t="$t" 'BEGIN { printf "| %s | %.0f | %.0f | %.3f |\n", l, b, t, t / b }'
}
echo "baseline $(git rev-parse --short "$base"), today $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + working tree'), $rounds rounds, medians:"
echo "| round trip | baseline | today | today ÷ baseline |"
echo "|---|---:|---:|---:|"
row "stdio, one at a time (calls/s)" stdio 1
row "stdio, one at a time (p50 µs)" stdio 2
row "stdio, 16 in flight (calls/s)" stdio 3
row "HTTP, 1 session (calls/s)" http1 1
row "HTTP, 1 session (p50 µs)" http1 2
row "HTTP, 16 sessions (calls/s)" http16 1
row "HTTP, 16 sessions (p50 µs)" http16 2
