"""Hostile MCP servers over stdio for purra's hostile-peer tests (standard library only).

Usage: stdio_server.py MODE. Each mode completes the handshake like a well-behaved server and then
misbehaves in one way (crates/purra-protocol/tests/it/hostile_client.rs and
crates/purra-cli/tests/it/hostile.rs say what each test expects):

  huge-first   answers tools/call with a 256 MiB line, id first (as the Python SDK orders members)
  huge-last    the same, id last (as the TypeScript SDK orders members)
  huge-anon    once two tools/call are in flight, one 256 MiB response line that names no id
  null-error   answers tools/call with an error whose id is null
  null-result  once two tools/call are in flight, one result whose id is null
  flood        after the first tools/list, 10000 tools/list_changed; tools/call "count" tells
               how many tools/list it was sent
  pages        tools/list: 40 pages of about 1 MiB each
  progress     tools/call: progress every 50 ms, never a result
  escapes      tools/call: text, a log message and a stderr line full of terminal escapes
  fork         forks a worker that sleeps; serverInfo.name is "PID WORKER_PID"
  ignore-eof   keeps running after stdin ends (until a signal); serverInfo.name is its PID
"""

import json
import os
import sys
import time

MODE = sys.argv[1]
OUT = sys.stdout.buffer
MIB = 1024 * 1024


def send(obj):
    OUT.write(json.dumps(obj).encode() + b"\n")
    OUT.flush()


def huge_line(prefix, suffix, size=256 * MIB):
    """Writes prefix + `size` bytes of 'x' + suffix + newline, never holding it all."""
    OUT.write(prefix)
    chunk = b"x" * MIB
    for _ in range(size // MIB):
        OUT.write(chunk)
    OUT.write(suffix + b"\n")
    OUT.flush()


def result(rid, res):
    send({"jsonrpc": "2.0", "id": rid, "result": res})


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def main():
    name = "hostile"
    if MODE == "fork":
        worker = os.fork()
        if worker == 0:
            time.sleep(1000)
            os._exit(0)
        name = f"{os.getpid()} {worker}"
    elif MODE == "ignore-eof":
        name = str(os.getpid())
    caps = {"tools": {"listChanged": True}}
    if MODE == "escapes":
        caps["logging"] = {}
    in_flight = []
    tools_lists = 0
    flooded = False
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            result(rid, {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": caps,
                "serverInfo": {"name": name, "version": "1"},
            })
        elif rid is None:
            continue
        elif method == "tools/list":
            tools_lists += 1
            if MODE == "pages":
                page = int(msg.get("params", {}).get("cursor") or 0)
                tools = [{"name": f"t{page}", "description": "d" * MIB,
                          "inputSchema": {"type": "object"}}]
                res = {"tools": tools}
                if page < 39:
                    res["nextCursor"] = str(page + 1)
                result(rid, res)
                continue
            tool = "final" if flooded else "first"
            result(rid, {"tools": [{"name": tool, "inputSchema": {"type": "object"}}]})
            if MODE == "flood" and not flooded:
                note = json.dumps({"jsonrpc": "2.0",
                                   "method": "notifications/tools/list_changed"}).encode()
                OUT.write((note + b"\n") * 10000)
                OUT.flush()
                flooded = True
        elif method == "logging/setLevel":
            result(rid, {})
        elif method == "tools/call":
            handle_call(msg, rid, in_flight, tools_lists)
        else:
            result(rid, {})
    if MODE == "ignore-eof":
        while True:
            time.sleep(1)


def handle_call(msg, rid, in_flight, tools_lists):
    if MODE == "huge-first":
        huge_line(b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode()
                  + b',"result":{"content":[{"type":"text","text":"', b'"}]}}')
    elif MODE == "huge-last":
        huge_line(b'{"result":{"content":[{"type":"text","text":"',
                  b'"}]},"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b"}")
    elif MODE in ("huge-anon", "null-result"):
        in_flight.append(rid)
        if len(in_flight) == 2:
            if MODE == "huge-anon":
                huge_line(b'{"jsonrpc":"2.0","result":{"x":"', b'"}}')
            else:
                send({"jsonrpc": "2.0", "id": None, "result": {}})
    elif MODE == "null-error":
        send({"jsonrpc": "2.0", "id": None,
              "error": {"code": -32700, "message": "Parse error"}})
    elif MODE == "flood":
        result(rid, text(str(tools_lists)))
    elif MODE == "progress":
        token = msg["params"]["_meta"]["progressToken"]
        n = 0
        while True:
            n += 1
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": n}})
            time.sleep(0.05)
    elif MODE == "escapes":
        evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "error", "data": "log " + evil}})
        sys.stderr.write("stderr " + evil + "\n")
        sys.stderr.flush()
        time.sleep(0.2)
        result(rid, text("result " + evil))
    else:
        result(rid, text("ok"))


if __name__ == "__main__":
    main()
