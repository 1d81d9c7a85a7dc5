#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance) against purra, in
# two pinned versions against one purra-conformance-server: 0.1.16 (peers/conformance) for the
# handshake revisions, the whole server suite (`--suite all`, 32 scenarios, pending ones
# included), then the client scenarios purra implements against purra-conformance-client: the
# four core ones one by one, then the authorization ones (`--suite auth`, `--suite backcompat`,
# the client-credentials extension scenarios and the draft ones: resource mismatch, offline
# access), each scenario checked for its own check ids; then 0.2.0-alpha.12
# (peers/conformance-next) with `--spec-version 2026-07-28`: every server scenario of the
# revision (40), the tasks extension's ten server scenarios and the Skills extension's three
# (sep-2640-skills-*) one by one, and the revision's client scenarios except authorization and
# extensions.
#
# Builds nothing. The binaries come from $PURRA_CONFORMANCE_SERVER and $PURRA_CONFORMANCE_CLIENT,
# else from $CARGO_TARGET_DIR/debug (default target/debug); build them first with
#   cargo build -p purra-conformance --bins
# Needs scripts/setup-peers.sh to have run (Node 22 at .peers/bin/node, the suite in
# peers/conformance/node_modules). Results (checks.json per scenario, logs) go to
# $PURRA_CONFORMANCE_OUT, default target/conformance (emptied first).
#
# Fails (exit 1) on any FAILURE or WARNING (the suite itself ignores server WARNINGs, the only way
# server-sse-polling reports a server that cannot resume a stream), and when a client scenario
# does not produce the checks it is expected to (the suite passes a do-nothing client with 0/0).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

PEERS_DIR="${PURRA_PEERS_DIR:-$REPO_ROOT/.peers}"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
SERVER_BIN="${PURRA_CONFORMANCE_SERVER:-$TARGET_DIR/debug/purra-conformance-server}"
CLIENT_BIN="${PURRA_CONFORMANCE_CLIENT:-$TARGET_DIR/debug/purra-conformance-client}"
CONFORMANCE="$REPO_ROOT/peers/conformance/node_modules/.bin/conformance"
OUT="${PURRA_CONFORMANCE_OUT:-$TARGET_DIR/conformance}"

CONFORMANCE_NEXT="$REPO_ROOT/peers/conformance-next/node_modules/.bin/conformance"

# What each pinned suite runs: its server scenarios; its client scenarios, each with the check ids
# that must all be SUCCESS and how many SUCCESS checks it reports (a client that does nothing
# passes with 0/0, so both are asserted).
SERVER_SCENARIOS=32
CLIENT_SCENARIOS=(initialize tools_call elicitation-sep1034-client-defaults sse-retry)
declare -A CLIENT_CHECKS=(
    [initialize]="mcp-client-initialization"
    [tools_call]="tool-add-numbers"
    [elicitation-sep1034-client-defaults]="client-elicitation-sep1034-string-default client-elicitation-sep1034-integer-default client-elicitation-sep1034-number-default client-elicitation-sep1034-enum-default client-elicitation-sep1034-boolean-default"
    [sse-retry]="client-sse-graceful-reconnect client-sse-retry-timing client-sse-last-event-id"
)
MODERN_SERVER_SCENARIOS=40
# The tasks extension's server scenarios (io.modelcontextprotocol/tasks on 2026-07-28), run one by
# one (`--suite all` leaves extensions out), each with the number of checks it reports, all to
# pass (tasks-status-notifications is pending in the suite itself: 0 checks).
TASKS_SCENARIOS=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
    tasks-request-state-removal tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope
    tasks-status-notifications tasks-required-task-error tasks-mrtr-composition)
declare -A TASKS_CHECKS=(
    [tasks-lifecycle]=9 [tasks-capability-negotiation]=5 [tasks-wire-fields]=4
    [tasks-request-state-removal]=3 [tasks-mrtr-input]=4 [tasks-request-headers]=5
    [tasks-dispatch-and-envelope]=9 [tasks-status-notifications]=0 [tasks-required-task-error]=3
    [tasks-mrtr-composition]=2
)
# The Skills extension's server scenarios (io.modelcontextprotocol/skills, SEP-2640), run one by
# one the same way, each with the number of checks it reports, all to pass.
SKILLS_SCENARIOS=(sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory)
declare -A SKILLS_CHECKS=(
    [sep-2640-skills-enumeration]=32 [sep-2640-skills-manifest]=6 [sep-2640-skills-directory]=7
)
MODERN_CLIENT_SCENARIOS=(tools_call request-metadata sep-2322-client-request-state http-standard-headers
    http-custom-headers http-invalid-tool-headers json-schema-ref-no-deref json-schema-2020-12-preservation)
declare -A MODERN_CLIENT_CHECKS=(
    [tools_call]="tool-add-numbers wire-schema-valid"
    [request-metadata]="sep-2575-http-client-sends-version-header sep-2575-client-populates-meta sep-2575-client-sends-client-info sep-2575-http-version-header-matches-meta sep-2575-client-declares-roots-capability sep-2575-client-declares-sampling-capability sep-2575-client-declares-elicitation-capability sep-2575-client-retry-supported-version"
    [sep-2322-client-request-state]="sep-2322-client-request-state-echoed sep-2322-client-jsonrpc-id-different sep-2322-client-parallel-isolation sep-2322-client-no-state-omitted sep-2322-default-result-type-complete"
    [http-standard-headers]="sep-2243-client-includes-standard-headers"
    [http-custom-headers]="sep-2243-client-supports-custom-headers sep-2243-client-mirrors-designated-params sep-2243-client-encode-values sep-2243-client-base64-unsafe sep-2243-client-omit-null"
    [http-invalid-tool-headers]="sep-2243-client-reject-invalid-tool sep-2243-x-mcp-header-not-empty sep-2243-x-mcp-header-primitive-only sep-2243-x-mcp-header-unique sep-2243-x-mcp-header-charset"
    [json-schema-ref-no-deref]="sep-2106-no-network-ref-deref"
    [json-schema-2020-12-preservation]="json-schema-2020-12-client-tool-found json-schema-2020-12-client-echo-completed json-schema-2020-12-client-\$schema-preserved json-schema-2020-12-client-\$defs-preserved json-schema-2020-12-client-additionalProperties-preserved sep-2106-client-composition-keywords-preserved sep-2106-client-conditional-keywords-preserved sep-2106-client-anchor-keyword-preserved wire-schema-valid"
)
# Scenarios that report one check id several times: the SUCCESS count to expect.
declare -A MODERN_CLIENT_COUNT=(
    [http-standard-headers]=10
    [http-custom-headers]=18
    [http-invalid-tool-headers]=12
)

# The authorization scenarios, by the run that carries them, each with the checks that must be
# there and SUCCESS (besides no FAILURE or WARNING anywhere in the scenario).
AUTH_SUITE=(auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
    auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported
    auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
    auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
    auth/pre-registration)
BACKCOMPAT_SUITE=(auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback)
AUTH_SINGLES=(auth/client-credentials-jwt auth/client-credentials-basic auth/resource-mismatch
    auth/offline-access-scope auth/offline-access-not-supported)
FLOW="authorization-server-metadata authorization-request pkce-code-challenge-sent pkce-s256-method-used token-request pkce-code-verifier-sent pkce-verifier-matches-challenge valid-bearer-token"
RESOURCE="resource-parameter-in-authorization resource-parameter-in-token resource-parameter-valid-uri resource-parameter-consistency"
declare -A AUTH_CHECKS=(
    [auth/metadata-default]="prm-pathbased-requested client-registration $FLOW"
    [auth/metadata-var1]="prm-pathbased-requested client-registration $FLOW"
    [auth/metadata-var2]="prm-pathbased-requested client-registration $FLOW"
    [auth/metadata-var3]="prm-pathbased-requested client-registration $FLOW"
    [auth/basic-cimd]="prm-pathbased-requested cimd-client-id-used $FLOW"
    [auth/scope-from-www-authenticate]="scope-from-www-authenticate client-registration $FLOW"
    [auth/scope-from-scopes-supported]="scope-from-scopes-supported client-registration $FLOW"
    [auth/scope-omitted-when-undefined]="scope-omitted-when-undefined client-registration $FLOW"
    [auth/scope-step-up]="scope-step-up-initial scope-step-up-escalation client-registration $FLOW"
    [auth/scope-retry-limit]="scope-retry-limit authorization-request token-request"
    [auth/token-endpoint-auth-basic]="token-endpoint-auth-method client-registration $RESOURCE $FLOW"
    [auth/token-endpoint-auth-post]="token-endpoint-auth-method client-registration $RESOURCE $FLOW"
    [auth/token-endpoint-auth-none]="token-endpoint-auth-method client-registration $RESOURCE $FLOW"
    [auth/pre-registration]="pre-registration-auth $FLOW"
    [auth/2025-03-26-oauth-metadata-backcompat]="client-registration $FLOW"
    [auth/2025-03-26-oauth-endpoint-fallback]="client-registration authorization-request token-request valid-bearer-token"
    [auth/client-credentials-jwt]="client-credentials-jwt-verified authorization-server-metadata token-request valid-bearer-token"
    [auth/client-credentials-basic]="client-credentials-basic-auth authorization-server-metadata token-request valid-bearer-token"
    [auth/resource-mismatch]="resource-mismatch-rejected prm-pathbased-requested"
    [auth/offline-access-scope]="sep-2207-offline-access-requested $FLOW"
    [auth/offline-access-not-supported]="sep-2207-offline-access-not-requested $FLOW"
)

log() { printf 'conformance: %s\n' "$*"; }
die() { printf 'conformance: error: %s\n' "$*" >&2; exit 1; }

# Absolute paths: the suite runs the client command from its own working directory.
abs() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$REPO_ROOT" "$1" ;; esac; }
SERVER_BIN="$(abs "$SERVER_BIN")"
CLIENT_BIN="$(abs "$CLIENT_BIN")"

[ -x "$SERVER_BIN" ] || die "no server binary at $SERVER_BIN (cargo build -p purra-conformance --bins, or set PURRA_CONFORMANCE_SERVER)"
[ -x "$CLIENT_BIN" ] || die "no client binary at $CLIENT_BIN (cargo build -p purra-conformance --bins, or set PURRA_CONFORMANCE_CLIENT)"
[ -x "$PEERS_DIR/bin/node" ] || die "no Node 22 at $PEERS_DIR/bin/node (run scripts/setup-peers.sh)"
[ -x "$CONFORMANCE" ] || die "the conformance suite is not installed (run scripts/setup-peers.sh)"
[ -x "$CONFORMANCE_NEXT" ] || die "the 2026-07-28 conformance suite is not installed (run scripts/setup-peers.sh)"
export PATH="$PEERS_DIR/bin:$PATH"
NODE="$PEERS_DIR/bin/node"

rm -rf "$OUT"
mkdir -p "$OUT"

# ---- the server under test, on a port the OS picks ----
SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

"$SERVER_BIN" --port 0 2>"$OUT/server.log" &
SERVER_PID=$!
PORT=""
for _ in $(seq 100); do
    PORT="$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$OUT/server.log")"
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(cat "$OUT/server.log")"
    sleep 0.1
done
[ -n "$PORT" ] || die "the server did not start listening within 10 s: $(cat "$OUT/server.log")"

# Wait until it answers HTTP (any status: a GET without a session is refused).
answered=""
for _ in $(seq 50); do
    # (the braces keep `2>/dev/null` from applying to the whole shell, as a bare exec would)
    if { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null; then
        printf 'GET /mcp HTTP/1.1\r\nHost: localhost:%s\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n' "$PORT" >&3
        status_line="$(head -n1 <&3 || true)"
        exec 3<&- 3>&-
        case "$status_line" in HTTP/1.1\ *) answered=yes; break ;; esac
    fi
    sleep 0.1
done
[ -n "$answered" ] || die "the server on port $PORT does not answer HTTP"
URL="http://localhost:$PORT/mcp"
log "server: $SERVER_BIN at $URL (pid $SERVER_PID)"

FAILED=()
SUMMARY=()

# ---- server suites ----
# server_suite LABEL BIN EXPECTED_SCENARIOS [suite args...]
server_suite() {
    local label="$1" bin="$2" expected="$3"
    shift 3
    local out="$OUT/$label-server"
    log "$label server suite: conformance server --url $URL $*"
    set +e
    "$bin" server --url "$URL" "$@" -o "$out" 2>&1 | tee "$out.log"
    local rc=${PIPESTATUS[0]}
    set -e
    local scenarios crossed total warnings
    scenarios="$(sed -n '/=== SUMMARY ===/,$p' "$out.log" | grep -cE '^[[:space:]]*(✓|✗) ' || true)"
    crossed="$(sed -n '/=== SUMMARY ===/,$p' "$out.log" | grep -cE '^[[:space:]]*✗ ' || true)"
    total="$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$out.log" | tail -n1 || true)"
    # server-sse-polling reports a server that does not resume streams only with WARNINGs, and
    # the suite does not fail on those: count them.
    warnings="$(find "$out" -name checks.json -print0 2>/dev/null | xargs -0 -r "$NODE" -e '
        let n = 0;
        for (const f of process.argv.slice(1))
            for (const c of JSON.parse(require("fs").readFileSync(f, "utf8")))
                if (c.status === "WARNING") { n++; console.error(`WARNING ${f}: ${c.id} ${c.errorMessage ?? ""}`); }
        console.log(n);
    ')"
    if [ "$rc" -ne 0 ] || [ "$scenarios" -ne "$expected" ] || [ "$crossed" -ne 0 ] \
        || [ "${warnings:-0}" != 0 ] || ! [[ "$total" =~ ^Total:\ [1-9][0-9]*\ passed,\ 0\ failed ]]; then
        FAILED+=("$label server suite (exit $rc, $scenarios/$expected scenarios, $crossed failed, ${warnings:-?} warnings; ${total:-no total})")
    fi
    SUMMARY+=("$label server suite $*: $scenarios scenarios, ${total:-no total line}, ${warnings:-?} warnings, exit $rc")
}

# extension_scenario LABEL BIN SCENARIO EXPECTED_CHECKS: one server scenario of an extension (its
# revision is the suite's default for extensions), every check passed, none warned.
extension_scenario() {
    local label="$1" bin="$2" scenario="$3" n_want="$4"
    local dir="$OUT/$label-server-$scenario"
    log "$label server scenario $scenario: conformance server --url $URL --scenario $scenario"
    set +e
    "$bin" server --url "$URL" --scenario "$scenario" -o "$dir" 2>&1 | tee "$dir.log"
    local rc=${PIPESTATUS[0]}
    set -e
    local passed
    passed="$(grep -E '^Passed: [0-9]+/[0-9]+' "$dir.log" | tail -n1 || true)"
    if [ "$rc" -ne 0 ] || ! [[ "$passed" == "Passed: $n_want/$n_want, 0 failed, 0 warnings" ]]; then
        FAILED+=("$label server $scenario (exit $rc; ${passed:-no Passed line}; want $n_want/$n_want)")
    fi
    SUMMARY+=("$label server $scenario: ${passed:-no Passed line}, exit $rc")
}

# ---- client scenarios ----
# Reads a scenario's checks.json: every expected check id present and SUCCESS (or SKIPPED beside
# a SUCCESS), no FAILURE or WARNING anywhere; prints what is wrong, or nothing.
check_client() {
    "$NODE" -e '
        const fs = require("fs");
        const [file, ...want] = process.argv.slice(1);
        const checks = JSON.parse(fs.readFileSync(file, "utf8"));
        const problems = [];
        for (const id of want) {
            const got = checks.filter((c) => c.id === id);
            if (got.length === 0) problems.push(`check ${id} missing`);
            // SKIPPED: not applicable to this client (a 2026-07-28 client sends no initialize);
            // the SUCCESS count is asserted separately.
            for (const c of got)
                if (c.status !== "SUCCESS" && c.status !== "SKIPPED")
                    problems.push(`${id}: ${c.status} ${c.errorMessage ?? ""}`);
            if (!got.some((c) => c.status === "SUCCESS")) problems.push(`check ${id} never succeeded`);
        }
        for (const c of checks) {
            if (!want.includes(c.id) && (c.status === "FAILURE" || c.status === "WARNING"))
                problems.push(`${c.id}: ${c.status} ${c.errorMessage ?? ""}`);
        }
        if (problems.length) console.log(problems.join("; "));
    ' "$@"
}

# client_scenario LABEL BIN SCENARIO "CHECK IDS" EXPECTED_COUNT [suite args...]
client_scenario() {
    local label="$1" bin="$2" scenario="$3" want="$4" n_want="$5"
    shift 5
    local dir="$OUT/$label-client-${scenario//\//_}"
    log "$label client scenario $scenario: conformance client --command $CLIENT_BIN --scenario $scenario $*"
    set +e
    "$bin" client --command "$CLIENT_BIN" --scenario "$scenario" "$@" -o "$dir" 2>&1 | tee "$dir.log"
    local rc=${PIPESTATUS[0]}
    set -e
    local passed checks_file problems
    passed="$(grep -E '^Passed: [0-9]+/[0-9]+' "$dir.log" | tail -n1 || true)"
    checks_file="$(find "$dir" -name checks.json 2>/dev/null | head -n1)"
    if [ -z "$checks_file" ]; then
        problems="no checks.json"
    else
        # shellcheck disable=SC2086 # the check ids are one word each
        problems="$(check_client "$checks_file" $want)"
    fi
    if [ "$rc" -ne 0 ] || [ -n "$problems" ] \
        || ! [[ "$passed" =~ ^Passed:\ $n_want/$n_want,\ 0\ failed,\ 0\ warnings ]]; then
        FAILED+=("$label client $scenario (exit $rc; ${passed:-no Passed line}; ${problems:-checks ok})")
    fi
    SUMMARY+=("$label client $scenario: ${passed:-no Passed line}, exit $rc")
}

server_suite 0.1.16 "$CONFORMANCE" "$SERVER_SCENARIOS" --suite all
for scenario in "${CLIENT_SCENARIOS[@]}"; do
    want="${CLIENT_CHECKS[$scenario]}"
    client_scenario 0.1.16 "$CONFORMANCE" "$scenario" "$want" "$(wc -w <<<"$want")"
done

server_suite 2026-07-28 "$CONFORMANCE_NEXT" "$MODERN_SERVER_SCENARIOS" --suite all --spec-version 2026-07-28
for scenario in "${TASKS_SCENARIOS[@]}"; do
    extension_scenario 2026-07-28 "$CONFORMANCE_NEXT" "$scenario" "${TASKS_CHECKS[$scenario]}"
done
for scenario in "${SKILLS_SCENARIOS[@]}"; do
    extension_scenario 2026-07-28 "$CONFORMANCE_NEXT" "$scenario" "${SKILLS_CHECKS[$scenario]}"
done
for scenario in "${MODERN_CLIENT_SCENARIOS[@]}"; do
    want="${MODERN_CLIENT_CHECKS[$scenario]}"
    n="${MODERN_CLIENT_COUNT[$scenario]:-$(wc -w <<<"$want")}"
    client_scenario 2026-07-28 "$CONFORMANCE_NEXT" "$scenario" "$want" "$n" --spec-version 2026-07-28
done

# ---- authorization scenarios: two suites run by the suite itself (scenarios in parallel), the
# rest one by one; every scenario's checks.json is read ----
# check_auth DIR SCENARIO: the scenario's checks, as check_client reads them.
check_auth() {
    local dir="$1" scenario="$2" file
    file="$(find "$dir" -path "$dir/$scenario-[0-9]*/checks.json" 2>/dev/null | head -n1)"
    if [ -z "$file" ]; then
        echo "no checks.json"
        return
    fi
    # shellcheck disable=SC2086 # the check ids are one word each
    check_client "$file" ${AUTH_CHECKS[$scenario]}
}

auth_run() { # NAME DIR SCENARIOS... -- CONFORMANCE ARGS...
    local name="$1" dir="$2"
    shift 2
    local scenarios=()
    while [ "$1" != "--" ]; do scenarios+=("$1"); shift; done
    shift
    log "client $name: conformance client --command $CLIENT_BIN $*"
    set +e
    "$CONFORMANCE" client --command "$CLIENT_BIN" "$@" -o "$dir" >"$dir.log" 2>&1
    local rc=$?
    set -e
    local bad=0 problems
    for scenario in "${scenarios[@]}"; do
        problems="$(check_auth "$dir" "$scenario")"
        if [ -n "$problems" ]; then
            bad=$((bad + 1))
            FAILED+=("client $scenario ($problems)")
        fi
        log "  $scenario: ${problems:-ok}"
    done
    local total
    total="$(grep -E '^(Total|Passed): ' "$dir.log" | tail -n1 || true)"
    if [ "$rc" -ne 0 ]; then
        FAILED+=("client $name (exit $rc; ${total:-no total line}; see $dir.log)")
    fi
    SUMMARY+=("client $name: ${#scenarios[@]} scenarios, $bad with problems, ${total:-no total line}, exit $rc")
}

auth_run "--suite auth" "$OUT/client-auth" "${AUTH_SUITE[@]}" -- --suite auth
auth_run "--suite backcompat" "$OUT/client-backcompat" "${BACKCOMPAT_SUITE[@]}" -- --suite backcompat
for scenario in "${AUTH_SINGLES[@]}"; do
    # Scenarios where the client is expected to fail (resource-mismatch) exit 0 all the same.
    auth_run "$scenario" "$OUT/client-${scenario//\//-}" "$scenario" -- --scenario "$scenario"
done

stop_server

log "===== summary ====="
for line in "${SUMMARY[@]}"; do log "  $line"; done
log "results: $OUT"
if [ "${#FAILED[@]}" -gt 0 ]; then
    for f in "${FAILED[@]}"; do printf 'conformance: FAILED: %s\n' "$f" >&2; done
    exit 1
fi
log "all passed"
