# Independent write server on the official Python MCP SDK 2.3.0, for purra's durable-write fault acceptance.
"""Write fixture server `write-python`.

Usage: write_server.py --dir DIR --scenario NAME

One tool, `set_value {value}`, accepts only the fixed synthetic value `purra-synthetic-7`. It
writes `value.txt` inside DIR (a fresh temporary directory the test made) and appends every
event to DIR/ledger.txt, flushed and fsynced, so the test can see what really happened on the
server side whatever the host believes.

Scenarios:
  success            write, answer
  lost-response      write, then never answer (the host times out)
  exit-before-write  exit as soon as the call arrives, writing nothing
  exit-after-write   write, then exit without answering
  error-after-write  write, then answer with a JSON-RPC error
"""

from __future__ import annotations

import argparse
import os
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SYNTHETIC = "purra-synthetic-7"
DIR = "."
SCENARIO = "success"
SCENARIOS = ["success", "lost-response", "exit-before-write", "exit-after-write", "error-after-write"]


def event(text: str) -> None:
    with open(os.path.join(DIR, "ledger.txt"), "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())


def write_value(value: str) -> None:
    path = os.path.join(DIR, "value.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(value)
        f.flush()
        os.fsync(f.fileno())
    event(f"wrote {value}")


TOOL = {
    "name": "set_value",
    "description": "Sets the stored value",
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
}


async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    return {"tools": [TOOL]}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    args = dict(params.arguments or {})
    value = args.get("value")
    event(f"call {params.name} {value}")
    if params.name != "set_value":
        return {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}
    if value != SYNTHETIC:
        event("refused")
        return {"content": [{"type": "text", "text": "only the synthetic value is accepted"}], "isError": True}
    if SCENARIO == "exit-before-write":
        event("exit before write")
        os._exit(3)
    write_value(value)
    if SCENARIO == "exit-after-write":
        event("exit after write")
        os._exit(4)
    if SCENARIO == "lost-response":
        event("withholding the response")
        await anyio.sleep_forever()
    if SCENARIO == "error-after-write":
        event("error response after write")
        raise MCPError(code=-32000, message="storage backend reported an error")
    event("responded")
    return {"content": [{"type": "text", "text": f"stored {value}"}], "structuredContent": {"stored": value}}


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = Server("write-python", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    global DIR, SCENARIO
    parser = argparse.ArgumentParser(description="purra durable-write fixture server (official Python SDK)")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    opts = parser.parse_args()
    DIR, SCENARIO = opts.dir, opts.scenario
    event(f"started {SCENARIO}")
    anyio.run(run_stdio)


if __name__ == "__main__":
    main()
