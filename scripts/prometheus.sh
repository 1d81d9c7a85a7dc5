#!/usr/bin/env bash
# The Prometheus server that scrapes `purra gateway`'s metrics endpoint in the telemetry tests
# (Debian's `prometheus` package).
#
#   scripts/prometheus.sh install      installs the package with apt-get when the binary is missing
#
# Idempotent: when `prometheus` is on PATH (or PURRA_PROMETHEUS names it), nothing is done. The tests
# start one server per test with a configuration and a data directory of their own, on a free
# loopback port; the package's own service is not used (and not started here).
set -euo pipefail

log() { printf 'prometheus: %s\n' "$*" >&2; }
die() { printf 'prometheus: error: %s\n' "$*" >&2; exit 1; }

present() {
    if [ -n "${PURRA_PROMETHEUS:-}" ]; then
        [ -x "$PURRA_PROMETHEUS" ]
    else
        command -v prometheus >/dev/null
    fi
}

install() {
    if present; then
        return
    fi
    command -v apt-get >/dev/null || die "prometheus is missing and apt-get is not available"
    [ "$(id -u)" = 0 ] || die "prometheus is missing; install Debian's prometheus package (as root)"
    log "installing Debian's prometheus package"
    # The package's maintainer scripts would start its service: policy-rc.d keeps them from it.
    local policy=/usr/sbin/policy-rc.d
    local had_policy=0
    [ -e "$policy" ] && had_policy=1
    if [ "$had_policy" = 0 ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 755 "$policy"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || {
        [ "$had_policy" = 0 ] && rm -f "$policy"
        die "apt-get install prometheus failed"
    }
    [ "$had_policy" = 0 ] && rm -f "$policy"
    present || die "the prometheus package installed but prometheus is not on PATH"
    log "$(prometheus --version 2>&1 | head -n 1 || true)"
}

case "${1:-}" in
    install) install ;;
    *) echo "usage: $0 install" >&2; exit 64 ;;
esac
