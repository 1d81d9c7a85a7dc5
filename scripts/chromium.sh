#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the approver page's browser tests (Debian's `chromium`
# and `chromium-driver` packages).
#
#   scripts/chromium.sh install      installs both packages with apt-get when either binary is missing
#
# Idempotent: when `chromium` and `chromedriver` are on PATH, nothing is done. The tests find them
# on PATH (or through PURRA_CHROMIUM and PURRA_CHROMEDRIVER).
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }
die() { printf 'chromium: error: %s\n' "$*" >&2; exit 1; }

present() {
    command -v chromium >/dev/null && command -v chromedriver >/dev/null
}

install() {
    if present; then
        return
    fi
    command -v apt-get >/dev/null || die "chromium/chromedriver are missing and apt-get is not available"
    [ "$(id -u)" = 0 ] || die "chromium/chromedriver are missing; install Debian's chromium and chromium-driver packages (as root)"
    log "installing Debian's chromium and chromium-driver packages"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
    present || die "chromium-driver installed but chromium/chromedriver not found on PATH"
    log "$(chromium --version 2>/dev/null || true); $(chromedriver --version 2>/dev/null | head -n 1 || true)"
}

case "${1:-}" in
    install) install ;;
    *) echo "usage: $0 install" >&2; exit 64 ;;
esac
