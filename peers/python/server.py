# Interop fixture server (peers/FIXTURES.md) built on the official Python MCP SDK 2.3.0 low-level Server.
"""Fixture MCP server `fixture-python`.

Usage: server.py            (stdio)
       server.py --http PORT (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp)
       server.py --sse PORT  (HTTP+SSE of 2024-11-05 on 127.0.0.1:PORT: GET /sse, POST /messages/)

Built on `mcp.server.lowlevel.Server` rather than `MCPServer`: the contract needs paginated
resources/list (2 per page), resources/subscribe, completion/complete, logging/setLevel with
level filtering and tools registered at runtime, which MCPServer does not all expose.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# The SDK marks logging, sampling, roots and resources/subscribe as deprecated for the
# 2026-07-28 revision; the fixture speaks 2025-06-18 / 2025-11-25 where they are current.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
PAGE_SIZE = 2

# ---- server-wide state ----
cancellations = 0
dynamic_tools: list[str] = []
# connection key -> (ServerSession of that connection, set of subscribed uris)
subscriptions: dict[int, tuple[Any, set[str]]] = {}
# connection key -> minimum log level set with logging/setLevel
log_levels: dict[int, str] = {}


def conn_key(ctx: Any) -> int:
    # The SDK hands each request a fresh ServerSession proxy; the Connection behind it is
    # per client connection (one for stdio, one per Mcp-Session-Id for HTTP).
    return id(getattr(ctx.session, "_connection", ctx.session))


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def result(t: str, **extra: Any) -> dict[str, Any]:
    return {"content": [text(t)], **extra}


def obj(props: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props or {}}
    if required:
        schema["required"] = required
    return schema


STATIC_TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "Echo the text", "inputSchema": obj({"text": {"type": "string"}}, ["text"])},
    {
        "name": "add",
        "description": "Add two numbers",
        "inputSchema": obj({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
        "outputSchema": obj({"sum": {"type": "number"}}, ["sum"]),
    },
    {"name": "fail", "description": "Always fails", "inputSchema": obj()},
    {"name": "progress", "description": "Reports progress", "inputSchema": obj({"steps": {"type": "integer"}}, ["steps"])},
    {"name": "block", "description": "Waits until cancelled", "inputSchema": obj()},
    {"name": "cancellations", "description": "Cancellation counter", "inputSchema": obj()},
    {"name": "log", "description": "Logs at four levels", "inputSchema": obj()},
    {"name": "sample", "description": "Asks the client to sample", "inputSchema": obj({"prompt": {"type": "string"}}, ["prompt"])},
    {"name": "elicit", "description": "Asks the client to elicit", "inputSchema": obj({"message": {"type": "string"}}, ["message"])},
    {"name": "roots", "description": "Lists the client's roots", "inputSchema": obj()},
    {"name": "add_tool", "description": "Registers a tool at runtime", "inputSchema": obj({"name": {"type": "string"}}, ["name"])},
    {"name": "touch", "description": "Sends resources/updated", "inputSchema": obj({"uri": {"type": "string"}}, ["uri"])},
]

# Required arguments and their JSON types, checked before a call runs (the low-level Server
# does not validate tool arguments): a bad call gets an isError result, as 2025-11-25 asks.
ARG_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "echo": {"text": str},
    "add": {"a": (int, float), "b": (int, float)},
    "progress": {"steps": int},
    "sample": {"prompt": str},
    "elicit": {"message": str},
    "add_tool": {"name": str},
    "touch": {"uri": str},
}

RESOURCES: list[dict[str, Any]] = [
    {"uri": f"fixture://static/{n}", "name": f"static-{n}", "mimeType": "text/plain"} for n in range(1, 6)
] + [{"uri": "fixture://watched", "name": "watched", "mimeType": "text/plain"}]

RESOURCE_TEXT = {f"fixture://static/{n}": f"static {n}" for n in range(1, 6)} | {"fixture://watched": "watched"}


def check_args(name: str, args: dict[str, Any]) -> str | None:
    for key, typ in ARG_TYPES.get(name, {}).items():
        if key not in args:
            return f"missing required argument '{key}'"
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, typ):
            return f"argument '{key}' has the wrong type"
    return None


async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    tools = STATIC_TOOLS + [
        {"name": n, "description": "Registered at runtime", "inputSchema": obj()} for n in dynamic_tools
    ]
    return {"tools": tools}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    global cancellations
    name = params.name
    args = dict(params.arguments or {})
    rid = ctx.request_id
    related = ServerMessageMetadata(related_request_id=rid)

    if name in dynamic_tools:
        return result(f"{name} called")
    if name not in {t["name"] for t in STATIC_TOOLS}:
        return result(f"unknown tool: {name}", isError=True)
    if (problem := check_args(name, args)) is not None:
        return result(f"invalid arguments for {name}: {problem}", isError=True)

    if name == "echo":
        return result(args["text"])
    if name == "add":
        total = args["a"] + args["b"]
        return result(json.dumps({"sum": total}), structuredContent={"sum": total})
    if name == "fail":
        return result("fixture failure", isError=True)
    if name == "progress":
        steps = args["steps"]
        for i in range(1, steps + 1):
            # No-op when the request carried no progressToken.
            await ctx.session.report_progress(i, steps, f"step {i}")
            await anyio.sleep(0.02)
        return result(f"done {steps}")
    if name == "block":
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            # The SDK's dispatcher cancels the handler's scope on notifications/cancelled.
            cancellations += 1
            raise
        return result("not cancelled")
    if name == "cancellations":
        return result(str(cancellations))
    if name == "log":
        minimum = LEVELS.index(log_levels.get(conn_key(ctx), "debug"))
        for level in ("debug", "info", "warning", "error"):
            if LEVELS.index(level) >= minimum:
                await ctx.session.send_log_message(level, f"{level} message", logger="fixture", related_request_id=rid)
        return result("logged")
    if name == "sample":
        res = await ctx.session.send_request(
            types.CreateMessageRequest(
                params=types.CreateMessageRequestParams.model_validate(
                    {"messages": [{"role": "user", "content": text(args["prompt"])}], "maxTokens": 64}
                )
            ),
            types.CreateMessageResult,
            metadata=related,
        )
        content = res.content
        return result(content.text if isinstance(content, types.TextContent) else "")
    if name == "elicit":
        res = await ctx.session.elicit_form(
            args["message"],
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            related_request_id=rid,
        )
        who = (res.content or {}).get("name", "")
        return result(f"{res.action}:{who if who is not None else ''}")
    if name == "roots":
        res = await ctx.session.send_request(types.ListRootsRequest(), types.ListRootsResult, metadata=related)
        return result(",".join(str(r.uri) for r in res.roots))
    if name == "add_tool":
        new = args["name"]
        if new not in dynamic_tools and new not in {t["name"] for t in STATIC_TOOLS}:
            dynamic_tools.append(new)
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=rid)
        return result(f"added {new}")
    if name == "touch":
        uri = args["uri"]
        me = conn_key(ctx)
        note = types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))
        for key, (session, uris) in list(subscriptions.items()):
            if uri not in uris:
                continue
            try:
                if key == me:
                    await ctx.session.send_notification(note, related_request_id=rid)
                else:
                    await session.send_notification(note)
            except Exception as exc:  # a subscriber that went away
                print(f"fixture-python: resources/updated to a gone subscriber: {exc}", file=sys.stderr)
                subscriptions.pop(key, None)
        return result(f"touched {uri}")
    return result(f"unhandled tool {name}", isError=True)


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(base64.urlsafe_b64decode(cursor.encode()).decode().removeprefix("offset:"))
    except ValueError:
        raise MCPError(code=types.INVALID_PARAMS, message="invalid cursor") from None


async def list_resources(ctx: Any, params: Any) -> dict[str, Any]:
    start = decode_cursor(params.cursor if params else None)
    page = RESOURCES[start : start + PAGE_SIZE]
    out: dict[str, Any] = {"resources": page}
    if start + PAGE_SIZE < len(RESOURCES):
        out["nextCursor"] = base64.urlsafe_b64encode(f"offset:{start + PAGE_SIZE}".encode()).decode()
    return out


async def list_templates(ctx: Any, params: Any) -> dict[str, Any]:
    return {"resourceTemplates": [{"uriTemplate": "fixture://items/{id}", "name": "item", "mimeType": "text/plain"}]}


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> dict[str, Any]:
    uri = str(params.uri)
    if uri in RESOURCE_TEXT:
        body = RESOURCE_TEXT[uri]
    elif uri.startswith("fixture://items/") and uri != "fixture://items/":
        body = "item " + uri.removeprefix("fixture://items/")
    else:
        raise MCPError(code=-32002, message=f"resource not found: {uri}", data={"uri": uri})
    return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": body}]}


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> dict[str, Any]:
    key = conn_key(ctx)
    session, uris = subscriptions.get(key, (ctx.session, set()))
    uris.add(str(params.uri))
    subscriptions[key] = (session, uris)
    return {}


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> dict[str, Any]:
    entry = subscriptions.get(conn_key(ctx))
    if entry is not None:
        entry[1].discard(str(params.uri))
    return {}


async def list_prompts(ctx: Any, params: Any) -> dict[str, Any]:
    return {
        "prompts": [
            {
                "name": "greet",
                "description": "Greeting",
                "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
            }
        ]
    }


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> dict[str, Any]:
    if params.name != "greet":
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt: {params.name}")
    args = params.arguments or {}
    if "name" not in args:
        raise MCPError(code=types.INVALID_PARAMS, message="missing required argument 'name'")
    greeting = f"Hello, {args['name']}!"
    if args.get("style") == "loud":
        greeting = greeting.upper()
    return {"description": "Greeting", "messages": [{"role": "user", "content": text(greeting)}]}


async def complete(ctx: Any, params: types.CompleteRequestParams) -> dict[str, Any]:
    values: list[str] = []
    ref = params.ref
    if isinstance(ref, types.PromptReference) and ref.name == "greet" and params.argument.name == "name":
        values = [v for v in ("alice", "alan", "bob") if v.startswith(params.argument.value)]
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}


async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> dict[str, Any]:
    log_levels[conn_key(ctx)] = params.level
    return {}


class FixtureServer(Server):
    def create_initialization_options(self, notification_options=None, *a: Any, **kw: Any) -> InitializationOptions:
        # Default to listChanged everywhere, also for the HTTP session manager, which calls this without arguments.
        return super().create_initialization_options(
            notification_options or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            *a,
            **kw,
        )


def dual(handler: Any, cacheable: bool = False) -> Any:
    """The handler, with a 2026-07-28 request's result completed as that revision requires
    (`resultType`, and `ttlMs`/`cacheScope` on cacheable results; nothing cached). The SDK answers
    `server/discover` for every server, so a client that probes (purra's auto mode) speaks that
    revision here; the contract's server-to-client requests (sampling, elicitation, roots) and
    notifications remain handshake-era features of this fixture."""

    async def wrapped(ctx: Any, params: Any) -> dict[str, Any]:
        res = await handler(ctx, params)
        if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            res = {**res, "resultType": "complete"}
            if cacheable:
                res.update(ttlMs=0, cacheScope="private")
        return res

    return wrapped


def build_server() -> FixtureServer:
    return FixtureServer(
        "fixture-python",
        version="1.0.0",
        on_list_tools=dual(list_tools, cacheable=True),
        on_call_tool=dual(call_tool),
        on_list_resources=dual(list_resources, cacheable=True),
        on_list_resource_templates=dual(list_templates, cacheable=True),
        on_read_resource=dual(read_resource, cacheable=True),
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=dual(list_prompts, cacheable=True),
        on_get_prompt=dual(get_prompt),
        on_completion=dual(complete),
        on_set_logging_level=set_level,
    )


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_http(port: int) -> None:
    import uvicorn

    app = build_server().streamable_http_app(host="127.0.0.1")
    print(f"fixture-python: listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def run_sse(port: int) -> None:
    """The deprecated HTTP+SSE transport, as the SDK's `mcp.server.sse` documents it."""
    import uvicorn
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    server = build_server()
    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    app = Starlette(
        routes=[Route("/sse", endpoint=handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)]
    )
    print(f"fixture-python: listening on http://127.0.0.1:{port}/sse", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser(description="purra interop fixture server (official Python SDK)")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--sse", type=int, metavar="PORT", help="serve HTTP+SSE on 127.0.0.1:PORT (GET /sse)")
    opts = parser.parse_args()
    if opts.sse is not None:
        run_sse(opts.sse)
    elif opts.http is not None:
        run_http(opts.http)
    else:
        anyio.run(run_stdio)


if __name__ == "__main__":
    main()
