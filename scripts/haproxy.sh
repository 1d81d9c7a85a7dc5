#!/usr/bin/env bash
# HAProxy for the gateway's fleet test and benchmarks (Debian's `haproxy` package): several
# `purra gateway` instances behind one load balancer.
#
#   scripts/haproxy.sh install      installs the package with apt-get when `haproxy` is missing
#
# Idempotent: when `haproxy` is on PATH (or at /usr/sbin/haproxy, where Debian puts it), nothing is
# done. The tests find it there, or through PURRA_HAPROXY.
set -euo pipefail

log() { printf 'haproxy: %s\n' "$*" >&2; }
die() { printf 'haproxy: error: %s\n' "$*" >&2; exit 1; }

present() {
    command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ]
}

install() {
    if present; then
        return
    fi
    command -v apt-get >/dev/null || die "haproxy is missing and apt-get is not available"
    [ "$(id -u)" = 0 ] || die "haproxy is missing; install Debian's haproxy package (as root)"
    log "installing Debian's haproxy package"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
    present || die "haproxy installed but not found on PATH or at /usr/sbin/haproxy"
    # The package starts a system service on Debian; the tests run their own instances.
    if command -v systemctl >/dev/null && systemctl is-active --quiet haproxy 2>/dev/null; then
        systemctl stop haproxy || true
    fi
    log "$("$(command -v haproxy || echo /usr/sbin/haproxy)" -v 2>/dev/null | head -n 1 || true)"
}

case "${1:-}" in
    install) install ;;
    *) echo "usage: $0 install" >&2; exit 64 ;;
esac
