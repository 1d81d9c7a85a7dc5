#!/usr/bin/env bash
# purra-protocol's Cargo features (run by scripts/test.sh):
# 1. a stdio-only server (`--no-default-features --features server,stdio`) pulls in no HTTP, TLS or
#    WebSocket crate (`cargo tree -e normal`, so dev- and build-dependencies do not count);
# 2. `otel` brings only OpenTelemetry's API crates (`opentelemetry`, `tracing-opentelemetry`), never
#    the SDK or an exporter, and nothing at all without it;
# 3. the feature combinations a user picks compile without warnings (`cargo check`), and so does
#    the `purra` binary without its `otel` feature, with no OpenTelemetry crate.
set -euo pipefail
cd "$(dirname "$0")/.."

forbidden='^(axum|axum-core|hyper|hyper-util|hyper-rustls|h2|http|http-body|reqwest|rustls|tokio-rustls|webpki-roots|tungstenite|tokio-tungstenite)$'
deps=$(cargo tree -q -p purra-protocol -e normal --no-default-features --features server,stdio \
    --prefix none | sed 's/ .*//' | sort -u)
found=$(grep -E "$forbidden" <<<"$deps" || true)
if [[ -n "$found" ]]; then
    echo "check-features: a stdio-only server depends on HTTP/TLS/WebSocket crates:" $found >&2
    cargo tree -q -p purra-protocol -e normal --no-default-features --features server,stdio \
        -i "$(head -n1 <<<"$found")" >&2 || true
    exit 1
fi
echo "check-features: server,stdio pulls in none of axum, hyper, reqwest, rustls, tungstenite"

# `otel`: the API crates only; without it, no OpenTelemetry crate at all.
otel_deps=$(cargo tree -q -p purra-protocol -e normal --features otel --prefix none | sed 's/ .*//' | sort -u)
if grep -Eq '^(opentelemetry_sdk|opentelemetry-otlp|opentelemetry-http|opentelemetry-proto|prost)$' <<<"$otel_deps"; then
    echo "check-features: otel pulls in an OpenTelemetry SDK or exporter crate" >&2
    exit 1
fi
grep -q '^tracing-opentelemetry$' <<<"$otel_deps" || { echo "check-features: otel without tracing-opentelemetry" >&2; exit 1; }
if cargo tree -q -p purra-protocol -e normal --prefix none | grep -q '^opentelemetry'; then
    echo "check-features: the default features depend on OpenTelemetry" >&2
    exit 1
fi
echo "check-features: otel brings only opentelemetry and tracing-opentelemetry; the defaults none"

# Each combination compiles on its own, without warnings (default features are built by the tests).
combinations=(
    ""                          # the types and the frame codec only
    "server,stdio"              # a stdio server
    "client"                    # what purra-mcp asks for
    "client,stdio"              # a stdio client
    "server,http-server"        # a Streamable HTTP server, no client, no validation
    "client,http-client,validation"
    "server,http-server,legacy-sse"   # the HTTP+SSE endpoints beside Streamable HTTP
    "client,http-client,legacy-sse"   # the HTTP+SSE client and its fallback
    "server,client,ws"          # WebSocket both ways
    "fuzzing"
    "auth"                      # OAuth client and resource-server guard (off by default)
    "otel"                      # trace context in _meta, with no transport
    "server,stdio,otel"         # a traced stdio server
    "client,http-client,otel"   # a traced HTTP client
)
for features in "${combinations[@]}"; do
    out=$(cargo check -q -p purra-protocol --lib --no-default-features --features "$features" \
        --message-format short 2>&1) || { echo "$out" >&2; echo "check-features: [$features] does not compile" >&2; exit 1; }
    if grep -q "warning" <<<"$out"; then
        echo "$out" >&2
        echo "check-features: [$features] compiles with warnings" >&2
        exit 1
    fi
    echo "check-features: [${features:-no features}] ok"
done

# The `purra` binary without its `otel` feature: no OpenTelemetry crate, no warning.
out=$(cargo check -q -p purra-cli --bin purra --no-default-features --message-format short 2>&1) \
    || { echo "$out" >&2; echo "check-features: purra-cli without otel does not compile" >&2; exit 1; }
if grep -q "warning" <<<"$out"; then
    echo "$out" >&2
    echo "check-features: purra-cli without otel compiles with warnings" >&2
    exit 1
fi
if cargo tree -q -p purra-cli -e normal --no-default-features --prefix none | grep -q '^opentelemetry'; then
    echo "check-features: purra-cli without otel depends on OpenTelemetry" >&2
    exit 1
fi
echo "check-features: purra-cli without otel ok (no OpenTelemetry crate)"
