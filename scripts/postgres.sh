#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests (Debian's `postgresql` package).
#
#   scripts/postgres.sh install      installs the package with apt-get when its binaries are missing
#   scripts/postgres.sh start DIR    initdb in DIR/data as an unprivileged user (`postgres` when run as
#                                    root), start on a free loopback port, create the `purra` role and
#                                    database; prints the environment the tests read, for `eval`:
#                                      PURRA_TEST_POSTGRES       postgres://purra@127.0.0.1:PORT/purra
#                                      PURRA_TEST_POSTGRES_CTL   DIR/ctl (stop | start | restart-fast)
#   scripts/postgres.sh stop DIR     stops it (fast shutdown); the caller removes DIR
#
# The server trusts loopback connections (a test cluster in a temporary directory, never a real one).
set -euo pipefail

log() { printf 'postgres: %s\n' "$*" >&2; }
die() { printf 'postgres: error: %s\n' "$*" >&2; exit 1; }

bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && printf '%s\n' "$d"
}

install() {
    if bindir >/dev/null; then
        return
    fi
    command -v apt-get >/dev/null || die "PostgreSQL is missing and apt-get is not available"
    [ "$(id -u)" = 0 ] || die "PostgreSQL is missing; install Debian's postgresql package (as root)"
    log "installing Debian's postgresql package"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bindir >/dev/null || die "postgresql installed but initdb/pg_ctl not found"
}

# Runs a command as the server's user: `postgres` when we are root, else ourselves.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start() {
    local dir=$1 bin port data
    install
    bin=$(bindir)
    mkdir -p "$dir"
    data="$dir/data"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || die "the postgres user is missing (it comes with Debian's postgresql package)"
        chown postgres "$dir"
        chmod 700 "$dir"
    fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --no-instructions >/dev/null
    cat > "$dir/ctl" <<CTL
#!/usr/bin/env bash
# Controls the test server in $data: stop | start | restart-fast.
set -euo pipefail
run() { if [ "\$(id -u)" = 0 ]; then runuser -u postgres -- "\$@"; else "\$@"; fi; }
opts="-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on"
case "\${1:-}" in
    stop) run "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null ;;
    start) run "$bin/pg_ctl" -D "$data" -o "\$opts" -l "$dir/server.log" -w start >/dev/null ;;
    restart-fast) run "$bin/pg_ctl" -D "$data" -o "\$opts" -l "$dir/server.log" -m fast -w restart >/dev/null ;;
    *) echo "usage: \$0 stop|start|restart-fast" >&2; exit 64 ;;
esac
CTL
    chmod 755 "$dir/ctl"
    "$dir/ctl" start || { cat "$dir/server.log" >&2 || true; die "the server did not start"; }
    "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -c "CREATE ROLE purra LOGIN SUPERUSER" -c "CREATE DATABASE purra OWNER purra" >/dev/null
    log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $data)"
    printf 'export PURRA_TEST_POSTGRES=%q\n' "postgres://purra@127.0.0.1:$port/purra"
    printf 'export PURRA_TEST_POSTGRES_CTL=%q\n' "$dir/ctl"
}

stop() {
    local dir=$1
    [ -x "$dir/ctl" ] || return 0
    "$dir/ctl" stop || log "stopping the server failed (already stopped?)"
}

case "${1:-}" in
    install) install ;;
    start) [ $# = 2 ] || die "usage: $0 start DIR"; start "$2" ;;
    stop) [ $# = 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
    *) die "usage: $0 install | start DIR | stop DIR" ;;
esac
