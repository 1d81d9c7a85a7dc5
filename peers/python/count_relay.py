# A stdio relay between an MCP client and a real server, counting what reaches the server.
"""Runs a server command and relays newline-delimited JSON-RPC both ways, unchanged.

Usage: count_relay.py --ledger FILE -- <server command> [args...]

Every `tools/call` request the client sends is recorded as `call NAME` in FILE (appended,
flushed and fsynced before the line is passed on), so a test counts exactly the calls that
reached the server, whatever the server is (the reference servers keep no such ledger). The
relay ends when either side closes; the server's stderr is inherited; its exit status is
the relay's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


def record(ledger: str, line: bytes) -> None:
    try:
        msg = json.loads(line)
    except ValueError:
        return
    items = msg if isinstance(msg, list) else [msg]
    for m in items:
        if isinstance(m, dict) and m.get("method") == "tools/call" and "id" in m:
            name = (m.get("params") or {}).get("name")
            with open(ledger, "a", encoding="utf-8") as f:
                f.write(f"call {name}\n")
                f.flush()
                os.fsync(f.fileno())


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--ledger" or args[2] != "--":
        print("usage: count_relay.py --ledger FILE -- <server command> [args...]", file=sys.stderr)
        return 64
    ledger, command = args[1], args[3:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def downstream() -> None:
        # Server to client: byte for byte.
        out = sys.stdout.buffer
        for line in iter(child.stdout.readline, b""):
            out.write(line)
            out.flush()

    relay = threading.Thread(target=downstream, daemon=True)
    relay.start()
    try:
        for line in iter(sys.stdin.buffer.readline, b""):
            record(ledger, line)
            child.stdin.write(line)
            child.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
    try:
        child.stdin.close()
    except OSError:
        pass
    code = child.wait()
    relay.join(timeout=5)
    return code


if __name__ == "__main__":
    sys.exit(main())
