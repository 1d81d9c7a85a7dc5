# Idempotent write server on the official Python MCP SDK 2.3.0: honours purra's idempotency key.
"""Idempotency fixture server `idempotent-python`.

Usage: idempotent_server.py --dir DIR [--declare] [--exit-after-charge]

Tools:
  charge {amount}  a write, idempotent by key: the first call under a key executes (appends a line
                   to DIR/executions.txt) and keeps its result in DIR/results.json; a repeat of
                   the key with the same arguments answers the kept result without executing, one
                   with other arguments is refused (isError). A call without a key always executes.
  lookup {}        a read: answers the number of executions, never executes anything.
  count {}         the same number, for a test that calls the fixture directly.

Every `tools/call` received is appended to DIR/calls.jsonl as one JSON object: the tool, its
arguments, the key in `_meta` ("io.purra/idempotency-key") and the SEP-3182 `idempotencyKey`
(null when absent). Every file is flushed and fsynced, and kept across restarts of the fixture,
so a test sees what really happened on the server side, whatever the host believes.

--declare             declare `capabilities.tools.idempotency: {}` (SEP-3182)
--exit-after-charge   exit without answering right after a charge executed (the result is kept)
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

META_KEY = "io.purra/idempotency-key"
DIR = "."
EXIT_AFTER_CHARGE = False

# The SDK's models drop members they do not know: let the call's SEP-3182 `idempotencyKey` through.
types.CallToolRequestParams.model_config["extra"] = "allow"
types.CallToolRequestParams.model_rebuild(force=True)


def append(name: str, line: str) -> None:
    with open(os.path.join(DIR, name), "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def executions() -> int:
    try:
        with open(os.path.join(DIR, "executions.txt"), encoding="utf-8") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def results() -> dict[str, Any]:
    try:
        with open(os.path.join(DIR, "results.json"), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def keep(key: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
    kept = results()
    kept[key] = {"arguments": arguments, "result": result}
    path = os.path.join(DIR, "results.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(kept, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


OBJECT_OUT = {"type": "object", "properties": {"executions": {"type": "integer"}}, "required": ["executions"]}
TOOLS = [
    {
        "name": "charge",
        "description": "Charges an amount (idempotent by key)",
        "inputSchema": {
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"charged": {"type": "integer"}, "execution": {"type": "integer"}},
            "required": ["charged", "execution"],
            "additionalProperties": False,
        },
    },
    {
        "name": "lookup",
        "description": "How many charges executed",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "outputSchema": OBJECT_OUT,
    },
    {
        "name": "count",
        "description": "How many charges executed",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "outputSchema": OBJECT_OUT,
    },
]


def error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    return {"tools": TOOLS}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    args = dict(params.arguments or {})
    meta_key = (params.meta or {}).get(META_KEY)
    param_key = (params.model_extra or {}).get("idempotencyKey")
    append(
        "calls.jsonl",
        json.dumps({"tool": params.name, "arguments": args, "meta_key": meta_key, "param_key": param_key}),
    )
    if params.name in ("lookup", "count"):
        n = executions()
        return {"content": [{"type": "text", "text": str(n)}], "structuredContent": {"executions": n}}
    if params.name != "charge":
        return error("unknown tool")
    if meta_key is not None and param_key is not None and meta_key != param_key:
        return error("two different idempotency keys")
    key = param_key if param_key is not None else meta_key
    if key is not None and not (isinstance(key, str) and 0 < len(key.encode()) <= 255):
        return error("an idempotency key is 1 to 255 bytes")
    if key is not None and key in results():
        kept = results()[key]
        if kept["arguments"] != args:
            return error("idempotency key reused with other arguments: refused")
        return kept["result"]
    amount = args.get("amount")
    if not isinstance(amount, int):
        return error("amount must be an integer")
    n = executions() + 1
    append("executions.txt", json.dumps({"amount": amount, "key": key}))
    result = {
        "content": [{"type": "text", "text": f"charged {amount}"}],
        "structuredContent": {"charged": amount, "execution": n},
    }
    if key is not None:
        keep(key, args, result)
    if EXIT_AFTER_CHARGE:
        os._exit(4)
    return result


async def run_stdio(declare: bool) -> None:
    from mcp.server.stdio import stdio_server

    server = Server("idempotent-python", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    if declare:
        # The SDK knows no SEP-3182: its result sieve drops the capability, so it is added after.
        from mcp.server import runner

        sieve = runner._methods.serialize_server_result

        def declaring(method: str, version: str, dumped: dict[str, Any]) -> dict[str, Any]:
            out = sieve(method, version, dumped)
            if method == "initialize":
                out.setdefault("capabilities", {}).setdefault("tools", {})["idempotency"] = {}
            return out

        runner._methods = types_methods_with(declaring)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def types_methods_with(serialize: Any) -> Any:
    """`mcp_types.methods` with `serialize_server_result` replaced (for the runner only)."""
    import types as pytypes

    from mcp_types import methods

    patched = pytypes.SimpleNamespace(**{name: getattr(methods, name) for name in dir(methods)})
    patched.serialize_server_result = serialize
    return patched


def main() -> None:
    global DIR, EXIT_AFTER_CHARGE
    parser = argparse.ArgumentParser(description="purra idempotency fixture server (official Python SDK)")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--declare", action="store_true")
    parser.add_argument("--exit-after-charge", action="store_true")
    opts = parser.parse_args()
    DIR, EXIT_AFTER_CHARGE = opts.dir, opts.exit_after_charge
    anyio.run(run_stdio, opts.declare)


if __name__ == "__main__":
    main()
