#!/usr/bin/env bash
# Instructions per call of a front in front of an HTTP upstream, counted by callgrind (load-
# independent, unlike calls/s on a shared machine): `http-load` (SESSIONS sessions, `add`) drives
# FRONT in front of `purra-bench-server --http`; one process at a time runs under callgrind, at two
# call counts, and the difference divided by the difference in calls is the marginal cost of one
# call in that process (startup, discovery and warm-up cancel out). FRONT is
#   gateway  `purra gateway` (the suite's configuration: `add` and `echo` open reads, its default
#            SQLite store holding the HTTP sessions),
#   forward  `http-forward`, the floor: purra's HTTP server handing each call to purra's HTTP
#            client, sessions in memory, no adapter,
# and the upstream alone is counted too (`upstream`), with the load client against it directly,
# and the load client itself (`client`, against the upstream alone).
# Needs valgrind and the release builds of `purra` and of purra-bench's programs.
#   [PURRA_BIN=path] [TAG=name] bench/callgrind-http.sh FRONT|upstream|client [SESSIONS [LOW HIGH]]
#   (default 16 sessions, 1000 and 3000 calls; the profiles are target/bench/callgrind/TAG.N)
set -euo pipefail
cd "$(dirname "$0")/.."
front=${1:?usage: bench/callgrind-http.sh gateway|forward|upstream|client [SESSIONS [LOW HIGH]]}
sessions=${2:-16}
low=${3:-1000}
high=${4:-3000}
out=target/bench/callgrind
tag=${TAG:-http-$front}
mkdir -p "$out"
root=$(pwd)
rel=target/release
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on $1" >&2
    return 1
}
total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# exec: `$!` of `cg ... &` is then valgrind itself, which the kill below reaches.
cg() { exec valgrind --tool=callgrind --callgrind-out-file="$1" "${@:2}"; }
for n in "$low" "$high"; do
    up=$(port)
    if [ "$front" = upstream ]; then
        cg "$out/$tag.$n" "$rel/purra-bench-server" --http "$up" >/dev/null 2>"$out/$tag.$n.log" &
    else
        "$rel/purra-bench-server" --http "$up" >/dev/null 2>&1 &
    fi
    pids+=($!)
    upid=$!
    wait_port "$up"
    url="http://127.0.0.1:$up/mcp"
    if [ "$front" != upstream ] && [ "$front" != client ]; then
        fp=$(port)
        case "$front" in
        gateway)
            config="$out/http-gateway.toml"
            rm -f "$out/http-gateway.db"*
            cat >"$config" <<TOML
[gateway]
name = "bench"
db = "$root/$out/http-gateway.db"
listen = "127.0.0.1:$fp"
max_calls_per_minute_per_caller = 60000

[upstreams.bench]
url = "$url"

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
            cg "$out/$tag.$n" ${PURRA_BIN:-$rel/purra} gateway --config "$config" >/dev/null 2>"$out/$tag.$n.log" &
            ;;
        forward)
            cg "$out/$tag.$n" "$rel/http-forward" --port "$fp" --upstream "$url" >/dev/null 2>"$out/$tag.$n.log" &
            ;;
        *) echo "no front $front" >&2; exit 64 ;;
        esac
        fpid=$!
        pids+=("$fpid")
        wait_port "$fp"
        url="http://127.0.0.1:$fp/mcp"
    fi
    if [ "$front" = client ]; then
        valgrind --tool=callgrind --callgrind-out-file="$out/$tag.$n" "$rel/http-load" --url "$url" \
            --clients "$sessions" --calls "$n" >/dev/null 2>"$out/$tag.$n.log"
        kill "$upid"; wait "$upid" 2>/dev/null || true
        continue
    fi
    "$rel/http-load" --url "$url" --clients "$sessions" --calls "$n" >/dev/null
    # callgrind writes its profile when the process ends: SIGTERM (a background job of a script
    # ignores SIGINT), then wait for it.
    if [ "$front" = upstream ]; then
        kill -TERM "$upid"; wait "$upid" || true
    else
        kill -TERM "$fpid"; wait "$fpid" || true
        kill "$upid"; wait "$upid" 2>/dev/null || true
    fi
done
a=$(total "$out/$tag.$low"); b=$(total "$out/$tag.$high")
echo "$front ($sessions sessions): $(( (b - a) / (high - low) )) instructions per call"
