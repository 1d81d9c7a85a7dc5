# Upstream server for purra gateway's end-to-end tests, on the official Python MCP SDK 2.3.0 (stdio).
"""Gateway upstream `gateway-upstream-python`.

Usage: gateway_upstream.py --dir DIR [--scenario NAME] [--write-delay-ms N] [--http]

Tools:
  get_value {}          the stored value (a read)
  set_value {value}     stores the value (a write)
  admin_reset {}        clears the value (never bound by the tests: a gateway must not show it)

Every event is appended to DIR/ledger.txt, flushed and fsynced, so the tests see what really
reached the server whatever the gateway believes: `started SCENARIO`, `call set_value V`,
`wrote V`, `responded`, `catalog changed N`, ...

Scenarios (what set_value does after logging the call):
  normal        write, answer
  slow-write    wait 5 s, then write and answer (time to kill the gateway while it dispatches)
  exit-on-call  write, then exit without answering (the upstream exits mid-call)
  hold-write    wait until the file DIR/release-write appears, then write and answer (a dispatch
                held in flight for as long as a test needs)

--write-delay-ms N: set_value waits N ms between logging the call and writing (any scenario), so
a gateway killed at random often dies while the upstream handles its write.

--http: Streamable HTTP on 127.0.0.1 at a free port instead of stdio, printing
`{"listening": PORT}` on stdout once it accepts connections: one upstream (one ledger) for a fleet
of gateways, each with its own session. Without a session to notify, there are no catalog
changes over HTTP.

Catalog changes (stdio): when the file DIR/change-catalog appears, it is removed, set_value's
description gets the next revision number, `catalog changed N` is logged and
notifications/tools/list_changed is sent on the session.
"""

from __future__ import annotations

import argparse
import os
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

DIR = "."
SCENARIO = "normal"
SCENARIOS = ["normal", "slow-write", "exit-on-call", "hold-write"]
REVISION = 1
SESSION: Any = None
WRITE_DELAY = 0.0


def event(text: str) -> None:
    with open(os.path.join(DIR, "ledger.txt"), "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())


def value_path() -> str:
    return os.path.join(DIR, "value.txt")


def read_value() -> str:
    try:
        with open(value_path(), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def write_value(value: str) -> None:
    with open(value_path(), "w", encoding="utf-8") as f:
        f.write(value)
        f.flush()
        os.fsync(f.fileno())
    event(f"wrote {value}")


def tools() -> list[dict[str, Any]]:
    return [
        {
            "name": "get_value",
            "description": "Reads the stored value",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
            "outputSchema": {
                "type": "object",
                "properties": {"value": {"type": "string"}},
                "required": ["value"],
                "additionalProperties": False,
            },
        },
        {
            "name": "set_value",
            "description": "Sets the stored value" + ("" if REVISION == 1 else f" (revision {REVISION})"),
            "inputSchema": {
                "type": "object",
                "properties": {"value": {"type": "string"}},
                "required": ["value"],
                "additionalProperties": False,
            },
            "outputSchema": {
                "type": "object",
                "properties": {"stored": {"type": "string"}},
                "required": ["stored"],
                "additionalProperties": False,
            },
        },
        {
            "name": "admin_reset",
            "description": "Clears the stored value",
            "inputSchema": {"type": "object", "properties": {}},
        },
    ]


async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    global SESSION
    SESSION = ctx.session
    return {"tools": tools()}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    args = dict(params.arguments or {})
    if params.name == "get_value":
        event("call get_value")
        value = read_value()
        return {"content": [{"type": "text", "text": value}], "structuredContent": {"value": value}}
    if params.name == "admin_reset":
        event("call admin_reset")
        write_value("")
        return {"content": [{"type": "text", "text": "reset"}]}
    if params.name != "set_value":
        return {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}
    value = str(args.get("value"))
    event(f"call set_value {value}")
    if SCENARIO == "slow-write":
        await anyio.sleep(5)
    if SCENARIO == "hold-write":
        while not os.path.exists(os.path.join(DIR, "release-write")):
            await anyio.sleep(0.05)
    if WRITE_DELAY:
        await anyio.sleep(WRITE_DELAY)
    write_value(value)
    if SCENARIO == "exit-on-call":
        event("exit mid-call")
        os._exit(5)
    event("responded")
    return {"content": [{"type": "text", "text": f"stored {value}"}], "structuredContent": {"stored": value}}


async def watch_catalog() -> None:
    global REVISION
    trigger = os.path.join(DIR, "change-catalog")
    while True:
        await anyio.sleep(0.05)
        if not os.path.exists(trigger) or SESSION is None:
            continue
        os.remove(trigger)
        REVISION += 1
        event(f"catalog changed {REVISION}")
        await SESSION.send_notification(types.ToolListChangedNotification())


def build() -> Server:
    return Server("gateway-upstream-python", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def run_http() -> None:
    import json
    import socket
    import sys

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    app = build().streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.01)
            print(json.dumps({"listening": sock.getsockname()[1]}), flush=True)
            sys.stdout.flush()

    anyio.run(serve)


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_catalog)
            await server.run(read, write, options)
            tg.cancel_scope.cancel()


def main() -> None:
    global DIR, SCENARIO, WRITE_DELAY
    parser = argparse.ArgumentParser(description="purra gateway test upstream (official Python SDK)")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--scenario", default="normal", choices=SCENARIOS)
    parser.add_argument("--write-delay-ms", type=int, default=0)
    parser.add_argument("--http", action="store_true")
    opts = parser.parse_args()
    DIR, SCENARIO, WRITE_DELAY = opts.dir, opts.scenario, opts.write_delay_ms / 1000.0
    event(f"started {SCENARIO}")
    if opts.http:
        run_http()
    else:
        anyio.run(run_stdio)


if __name__ == "__main__":
    main()
