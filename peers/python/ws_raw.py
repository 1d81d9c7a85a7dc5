# Raw WebSocket peer for purra's WebSocket transport tests, built on the `websockets` package (17.4), not on an MCP SDK.
"""Speaks raw JSON-RPC text frames to (or from) purra over WebSocket and prints what it saw.

Usage: ws_raw.py client URL LIMIT   run against purra's WebSocket server at URL, whose message
                                    bound is LIMIT bytes
       ws_raw.py server             serve one purra client on 127.0.0.1 (a free port); the first
                                    line printed is `listening on ws://127.0.0.1:PORT`

Each check prints one line; the Rust test (crates/purra-examples/tests/it/ws.rs) asserts the exact
output. Anything unexpected raises, which exits non-zero with a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

TIMEOUT = 5

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "ws-raw", "version": "1.0.0"},
    },
}


def out(line: str) -> None:
    print(line, flush=True)


async def recv(ws) -> str:
    return await asyncio.wait_for(ws.recv(), TIMEOUT)


async def expect_close(ws, send) -> str:
    """Sends `send`, then reads until the server closes; returns the server's close code and reason."""
    await ws.send(send)
    try:
        while True:
            await recv(ws)
    except ConnectionClosed as e:
        assert e.rcvd is not None, f"no close frame received: {e!r}"
        return f"{e.rcvd.code} {e.rcvd.reason}"


async def refused(url: str, **kwargs) -> str:
    try:
        async with connect(url, open_timeout=TIMEOUT, **kwargs):
            pass
    except InvalidStatus as e:
        body = (e.response.body or b"").decode("utf-8", "replace").strip()
        return f"HTTP {e.response.status_code} {body}"
    raise AssertionError("the handshake was accepted")


async def client(url: str, limit: int) -> None:
    async with connect(url, subprotocols=["mcp"], open_timeout=TIMEOUT) as ws:
        out(f"subprotocol {ws.subprotocol}")
        await ws.send(json.dumps(INITIALIZE))
        out(f"initialize {await recv(ws)}")
        await ws.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await ws.send('{"jsonrpc":"2.0","id":2,"method":"ping"}')
        out(f"ping {await recv(ws)}")
        pong = await ws.ping()
        await asyncio.wait_for(pong, TIMEOUT)
        out("websocket pong")
        await ws.close()
        out(f"closed {ws.close_code}")

    async with connect(url, subprotocols=["mcp"], open_timeout=TIMEOUT) as ws:
        out(f"binary: close {await expect_close(ws, b'{}')}")

    async with connect(url, subprotocols=["mcp"], open_timeout=TIMEOUT) as ws:
        base = '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"pad":""}}}'
        at_limit = base.replace('"pad":""', '"pad":"' + "x" * (limit - len(base)) + '"')
        await ws.send(at_limit)
        out(f"at-limit: {len(at_limit)} bytes, answer {await recv(ws)}")
        out(f"oversize: close {await expect_close(ws, 'x' * (limit + 1))}")

    out(f"no-subprotocol: {await refused(url)}")
    out(f"other-subprotocol: {await refused(url, subprotocols=['chat'])}")
    out(f"bad-origin: {await refused(url, subprotocols=['mcp'], origin='http://evil.example')}")
    async with connect(url, subprotocols=["mcp"], origin="http://localhost:5173", open_timeout=TIMEOUT) as ws:
        out(f"localhost-origin: subprotocol {ws.subprotocol}")


async def server() -> None:
    done = asyncio.get_running_loop().create_future()

    async def handler(ws) -> None:
        offered = ws.request.headers.get("Sec-WebSocket-Protocol")
        out(f"offered {offered}; selected {ws.subprotocol}")
        init = json.loads(await recv(ws))
        assert init["method"] == "initialize", init
        out(f"initialize {init['params']['protocolVersion']} from {init['params']['clientInfo']['name']}")
        await ws.send(json.dumps({
            "jsonrpc": "2.0",
            "id": init["id"],
            "result": {
                "protocolVersion": init["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "ws-raw-server", "version": "1.0.0"},
            },
        }))
        while True:
            msg = json.loads(await recv(ws))
            method = msg.get("method")
            if method == "notifications/initialized":
                out("initialized")
            elif method == "tools/list":
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [
                    {"name": "echo", "inputSchema": {"type": "object"}},
                ]}}))
                out("tools/list")
            elif method == "tools/call":
                args = msg["params"]["arguments"]
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                    "content": [{"type": "text", "text": f"raw:{args['text']}"}],
                }}))
                out(f"tools/call {msg['params']['name']}")
                break
            else:
                raise AssertionError(f"unexpected message {msg}")
        await ws.send(b"\x00binary")
        try:
            while True:
                await recv(ws)
        except ConnectionClosed as e:
            assert e.rcvd is not None, f"no close frame received: {e!r}"
            out(f"client closed: {e.rcvd.code} {e.rcvd.reason}")
        done.set_result(None)

    async with serve(handler, "127.0.0.1", 0, subprotocols=["mcp"]) as srv:
        port = srv.sockets[0].getsockname()[1]
        out(f"listening on ws://127.0.0.1:{port}")
        await asyncio.wait_for(done, 30)


def main() -> None:
    if sys.argv[1:2] == ["client"] and len(sys.argv) == 4:
        asyncio.run(client(sys.argv[2], int(sys.argv[3])))
    elif sys.argv[1:] == ["server"]:
        asyncio.run(server())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
