# Host-adapter fixture server on the official Python MCP SDK 2.3.0: read tools for purra-mcp's tests.
"""Fixture MCP server `adapter-python`.

Usage: adapter_server.py [--http PORT] [--ledger FILE]

Every tools/call is appended (tool name, one per line, flushed and fsynced) to the ledger
file, so a test can check on the server side which calls were really sent. Error texts carry
the canary CANARY-7f3a, which must never reach the model.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

CANARY = "CANARY-7f3a"
LEDGER: str | None = None

LOOKUP_OUT = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
    "additionalProperties": False,
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Searches documents",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": "lookup",
        "description": "Looks an item up",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "outputSchema": LOOKUP_OUT,
    },
    {
        "name": "with_default",
        "description": "Has a default in its schema",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "default": "x"}}},
    },
    {"name": "change_list", "description": "Changes the tool list while it runs", "inputSchema": {"type": "object"}},
    {"name": "fails", "description": "Fails with isError", "inputSchema": {"type": "object"}},
    {"name": "rpc_fails", "description": "Fails with a JSON-RPC error", "inputSchema": {"type": "object"}},
    {"name": "image", "description": "Answers an image", "inputSchema": {"type": "object"}},
]

added: list[str] = []


def record(name: str) -> None:
    if LEDGER:
        with open(LEDGER, "a", encoding="utf-8") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    extra = [{"name": n, "description": "Added at runtime", "inputSchema": {"type": "object"}} for n in added]
    return {"tools": TOOLS + extra}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    name = params.name
    args = dict(params.arguments or {})
    record(name)
    if name == "search":
        return {"content": [text(f"found: {args.get('query', '')}")]}
    if name == "lookup":
        item = {"id": args["id"], "name": f"item {args['id']}"}
        return {"content": [text(str(item))], "structuredContent": item}
    if name == "change_list":
        added.append(f"added_{len(added)}")
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
        await anyio.sleep(0.2)
        return {"content": [text("changed")]}
    if name == "fails":
        return {"content": [text(f"tool failed: {CANARY}")], "isError": True}
    if name == "rpc_fails":
        raise MCPError(code=-32000, message=f"remote says {CANARY}", data={"detail": CANARY})
    if name == "image":
        return {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}
    return {"content": [text(f"unknown tool {name}")], "isError": True}


class AdapterServer(Server):
    def create_initialization_options(self, notification_options=None, *a: Any, **kw: Any) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *a, **kw
        )


def build() -> AdapterServer:
    return AdapterServer("adapter-python", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_http(port: int) -> None:
    import uvicorn

    app = build().streamable_http_app(host="127.0.0.1")
    print(f"adapter-python: listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    global LEDGER
    parser = argparse.ArgumentParser(description="purra host-adapter fixture server (official Python SDK)")
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--ledger", metavar="FILE")
    opts = parser.parse_args()
    LEDGER = opts.ledger
    if opts.http is not None:
        run_http(opts.http)
    else:
        anyio.run(run_stdio)


if __name__ == "__main__":
    main()
