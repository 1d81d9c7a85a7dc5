# Downstream client for purra gateway's end-to-end tests, on the official Python MCP SDK 2.3.0.
"""Runs steps against an MCP server (a purra gateway) and prints one JSON line per event.

Usage: gateway_client.py [--elicit approve|deny] [--apps] [--bearer-env VAR] --steps JSON (-- <server command> [args...] | --http URL)

Steps (a JSON array, run in order):
  {"list": true}                      prints {"step": "list", "tools": [Tool, ...]}
  {"call": NAME, "args": {...}}       prints {"step": "call", "tool": NAME, "result": CallToolResult}
                                      or {"step": "call", "tool": NAME, "error": TEXT}; with
                                      "meta": {...} the request's `_meta` carries those keys too
                                      (a `traceparent`, which the SDK sends only when an
                                      OpenTelemetry SDK is installed, and none is here)
  {"wait_list_changed": true}         waits (up to 60 s) for notifications/tools/list_changed
                                      since the previous step, prints {"step": "list_changed"}

Events printed as they happen: {"event": "list_changed"}, {"event": "progress", "message": ...},
{"event": "elicit", "message": TEXT, "answer": "approve"|"deny"}. With --elicit the client
declares the elicitation capability and its handler answers every form with that decision.
With --bearer-env (HTTP only) every request carries `Authorization: Bearer <the value of VAR>`.
With --apps the client declares MCP Apps support (`io.modelcontextprotocol/ui` with the app MIME
type), as a host that renders Apps does, so it may call the gateway's app-only tools itself.
Ends with {"event": "done"}; exits 0 unless the connection could not be made.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

CALL_TIMEOUT = 90.0
LIST_CHANGES = {"count": 0}


def emit(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, sort_keys=True), flush=True)


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def on_message(msg: Any) -> None:
    if isinstance(msg, Exception):
        emit({"event": "transport_error", "error": repr(msg)})
        return
    root = getattr(msg, "root", msg)
    if isinstance(root, types.ToolListChangedNotification):
        LIST_CHANGES["count"] += 1
        emit({"event": "list_changed"})


def elicitation(decision: str):
    async def handler(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        emit({"event": "elicit", "message": params.message, "answer": decision})
        return types.ElicitResult(action="accept", content={"decision": decision, "note": "from the python client"})

    return handler


async def progress(value: float, total: float | None, message: str | None) -> None:
    emit({"event": "progress", "message": message})


async def run(opts: argparse.Namespace) -> None:
    steps = json.loads(opts.steps)
    async with AsyncExitStack() as stack:
        if opts.http:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = {"Authorization": f"Bearer {os.environ[opts.bearer_env]}"} if opts.bearer_env else None
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            read, write = await stack.enter_async_context(streamable_http_client(opts.http, http_client=http))
        else:
            params = StdioServerParameters(command=opts.command[0], args=opts.command[1:], env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
        kwargs: dict[str, Any] = {"message_handler": on_message}
        if opts.elicit:
            kwargs["elicitation_callback"] = elicitation(opts.elicit)
        if opts.apps:
            kwargs["extensions"] = {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                client_info=types.Implementation(name="gateway-client-python", version="1.0.0"),
                **kwargs,
            )
        )
        await session.initialize()
        seen = LIST_CHANGES["count"]
        for step in steps:
            if step.get("wait_list_changed"):
                with anyio.fail_after(60):
                    while LIST_CHANGES["count"] == seen:
                        await anyio.sleep(0.02)
                seen = LIST_CHANGES["count"]
                emit({"step": "list_changed"})
                continue
            seen = LIST_CHANGES["count"]
            if step.get("list"):
                res = await session.list_tools()
                emit({"step": "list", "tools": [dump(t) for t in res.tools]})
                continue
            name = step["call"]
            try:
                with anyio.fail_after(CALL_TIMEOUT):
                    res = await session.call_tool(
                        name, step.get("args", {}), progress_callback=progress, meta=step.get("meta")
                    )
                emit({"step": "call", "tool": name, "result": dump(res)})
            except Exception as err:  # the connection closed, a timeout: reported, then on
                emit({"step": "call", "tool": name, "error": f"{type(err).__name__}: {err}"})
                break
    emit({"event": "done"})


def main() -> None:
    argv = sys.argv[1:]
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description="purra gateway test client (official Python SDK)")
    parser.add_argument("--http", metavar="URL")
    parser.add_argument("--elicit", choices=["approve", "deny"])
    parser.add_argument("--bearer-env", metavar="VAR")
    parser.add_argument("--apps", action="store_true")
    parser.add_argument("--steps", required=True)
    opts = parser.parse_args(argv)
    opts.command = command
    if bool(opts.http) == bool(command):
        parser.error("give exactly one of `-- <server command> [args...]` or `--http URL`")
    try:
        anyio.run(run, opts)
    except BaseException as err:  # noqa: BLE001 - reported for the test, which decides
        while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
            err = err.exceptions[0]
        emit({"event": "failed", "error": f"{type(err).__name__}: {err}"})
        emit({"event": "done"})


if __name__ == "__main__":
    main()
