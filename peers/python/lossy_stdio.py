# A stdio relay that loses one tools/call answer, for the tests of unknown effects and resends.
"""Lossy stdio relay `lossy-stdio`.

Usage: lossy_stdio.py --trigger FILE --ledger FILE -- COMMAND [ARG...]

Starts COMMAND (an MCP server over stdio) and relays newline-delimited JSON-RPC both ways. When a
`tools/call` answer comes back while FILE exists, FILE is removed, `lost answer ID` is appended to
the ledger (fsynced), the server is stopped and the relay exits without passing the answer on:
the call reached the server and had its effect, and the host never heard back. Every relay start
appends `started` to the ledger. Without FILE the relay loses nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading


def append(ledger: str, line: str) -> None:
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trigger", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a COMMAND to relay is required")
    append(args.ledger, "started")
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    calls: set[str] = set()
    lock = threading.Lock()

    def downstream() -> None:
        # Host to server: note the ids of tools/call requests.
        for line in sys.stdin.buffer:
            try:
                message = json.loads(line)
                if isinstance(message, dict) and message.get("method") == "tools/call":
                    with lock:
                        calls.add(json.dumps(message.get("id")))
            except ValueError:
                pass
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except BrokenPipeError:
                break
        try:
            child.stdin.close()
        except BrokenPipeError:
            pass

    threading.Thread(target=downstream, daemon=True).start()
    for line in child.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message:
            ident = json.dumps(message.get("id"))
            with lock:
                answers_call = ident in calls
            if answers_call and os.path.exists(args.trigger):
                os.remove(args.trigger)
                append(args.ledger, f"lost answer {ident}")
                child.kill()
                child.wait()
                os._exit(0)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    child.wait()


if __name__ == "__main__":
    main()
