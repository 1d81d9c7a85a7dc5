# Write server honouring purra's idempotency key, on the official Python MCP SDK 2.3.0 (stdio), for
# the tests of reconciling and resending `unknown` effects.
"""Keyed write fixture server `keyed-write-python`.

Usage: keyed_write_server.py --dir DIR

One tool, `set_value {value}`, stores the value. A request's `_meta["io.purra/idempotency-key"]`
names the effect: the first request
with a key executes and keeps its result under the key in DIR/results.json (written and fsynced
before anything else happens), so a later request with the same key, even to a fresh process,
is answered with the kept result and executes nothing, as a real idempotent upstream does.
A request without a key always executes.

Every event is appended to DIR/ledger.txt, flushed and fsynced: `started`, `call set_value V
key=K`, `executed V`, `replayed K`, `exit after execute`. The tests count `executed` lines.

Crash: when the file DIR/crash-after-execute exists at a call, it is removed and the process
exits right after executing (and keeping the result), without answering: the write reached the
upstream and had its effect, and the host never heard back.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

KEY_META = "io.purra/idempotency-key"
DIR = "."


def event(text: str) -> None:
    with open(os.path.join(DIR, "ledger.txt"), "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())


def results() -> dict[str, str]:
    try:
        with open(os.path.join(DIR, "results.json"), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def keep(key: str, value: str) -> None:
    kept = results()
    kept[key] = value
    tmp = os.path.join(DIR, "results.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(kept, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(DIR, "results.json"))


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


def answer(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"stored {value}"}], "structuredContent": {"stored": value}}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    args = dict(params.arguments or {})
    value = str(args.get("value"))
    meta = dict(params.meta or {})
    key = meta.get(KEY_META)
    event(f"call {params.name} {value} key={key}")
    if params.name != "set_value":
        return {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}
    if key is not None and key in results():
        event(f"replayed {key}")
        return answer(results()[key])
    event(f"executed {value}")
    if key is not None:
        keep(key, value)
    crash = os.path.join(DIR, "crash-after-execute")
    if os.path.exists(crash):
        os.remove(crash)
        event("exit after execute")
        os._exit(4)
    return answer(value)


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = Server("keyed-write-python", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    global DIR
    parser = argparse.ArgumentParser(description="purra keyed write fixture server (official Python SDK)")
    parser.add_argument("--dir", required=True)
    opts = parser.parse_args()
    DIR = opts.dir
    event("started")
    anyio.run(run_stdio)


if __name__ == "__main__":
    main()
