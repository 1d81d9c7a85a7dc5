"""A hostile Streamable HTTP client: idle TCP connections, then bare initializations.

Used by crates/purra-protocol/tests/it/hostile_server.rs (issue 10, acceptance 3). It runs in its own
process so that purra's process holds only its own side of every connection.

Protocol on stdout (one line each, flushed):
  idle N SECONDS     N connections are open and idle (every other one sent half a request line
                     and a Host header, slowloris style, and nothing more)
  inits N SECONDS    N bare initializations were answered 200 with a session id (each an
                     `initialize` and nothing after it: no `notifications/initialized`)
  error WHY          something failed; the exit status is 2
On stdin: the line `go` starts the initializations; end of input closes every connection and
exits.
"""

import argparse
import http.client
import json
import resource
import socket
import sys
import threading
import time

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        },
    }
).encode()


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fail(why):
    say(f"error {why}")
    sys.exit(2)


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        fail(f"the descriptor hard limit {hard} is below the {need} this peer needs")
    if soft == resource.RLIM_INFINITY or soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def open_idle(port, n):
    conns = []
    for i in range(n):
        for attempt in range(50):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError as e:
                if attempt == 49:
                    fail(f"connection {i}: {e}")
                time.sleep(0.05)
        if i % 2:
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        conns.append(s)
    return conns


def initializations(port, count, counter, lock, errors):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    for _ in range(count):
        try:
            conn.request("POST", "/mcp", body=INIT, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as e:
            with lock:
                errors.append(f"{type(e).__name__}: {e}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        if resp.status != 200 or not resp.getheader("mcp-session-id") or b'"result"' not in body:
            with lock:
                errors.append(f"status {resp.status}: {body[:200]!r}")
            continue
        with lock:
            counter[0] += 1
    conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--inits", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    raise_fd_limit(args.idle + args.workers + 256)

    t = time.monotonic()
    conns = open_idle(args.port, args.idle)
    say(f"idle {len(conns)} {time.monotonic() - t:.2f}")

    if sys.stdin.readline().strip() != "go":
        return
    t = time.monotonic()
    counter, lock, errors = [0], threading.Lock(), []
    per = args.inits // args.workers
    threads = [
        threading.Thread(
            target=initializations,
            args=(args.port, per + (1 if w < args.inits % args.workers else 0), counter, lock, errors),
        )
        for w in range(args.workers)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        fail(f"{len(errors)} initializations failed, the first: {errors[0]}")
    say(f"inits {counter[0]} {time.monotonic() - t:.2f}")

    sys.stdin.read()
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
