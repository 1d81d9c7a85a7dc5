# Interop peer for the 2026-07-28 revision (peers/FIXTURES.md, "2026-07-28"), on the official Python MCP SDK 2.3.0.
"""2026-07-28 fixture server and client, Python SDK 2.3.0.

Usage: modern.py server                  (stdio)
       modern.py server --http PORT      (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp)
       modern.py client URL              (checks a Streamable HTTP server)
       modern.py client -- CMD [ARGS...] (checks a stdio server it starts)

The server is an `MCPServer` (`fixture-python-modern`): `echo`, `elicit` (its answer comes from a
resolver, which the SDK turns into an `input_required` round trip) and `add_tool` (registers a
tool and publishes the tools list change to `subscriptions/listen` streams).

The client runs in the SDK's auto mode (the `server/discover` probe) and prints `ok <check>` per
check, `FAIL <check>: <why>` and exit 1 on the first failure, and
`modern-client: N passed, 0 failed` at the end.
"""

from __future__ import annotations

import sys
import warnings
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import BaseModel

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

MODERN = "2026-07-28"


class Name(BaseModel):
    name: str


async def ask(message: str) -> Elicit[Name]:
    return Elicit(message, Name)


def serve(argv: list[str]) -> None:
    mcp = MCPServer("fixture-python-modern", version="1.0.0")

    @mcp.tool(description="Echoes the text")
    def echo(text: str) -> str:
        return text

    @mcp.tool(description="Asks the user for a name (an input_required round trip)")
    def elicit(message: str, answer: Annotated[ElicitationResult[Name], Resolve(ask)]) -> str:
        name = answer.data.name if answer.action == "accept" else ""
        return f"{answer.action}:{name}"

    @mcp.tool(description="Registers a tool at runtime and announces the tools list change")
    async def add_tool(name: str, ctx: Context) -> str:
        def added() -> str:
            return f"{name} called"

        mcp.add_tool(added, name=name, description="A tool added at runtime")
        await ctx.notify_tools_changed()
        return f"added {name}"

    match argv:
        case []:
            mcp.run("stdio")
        case ["--http", port]:
            mcp.run("streamable-http", host="127.0.0.1", port=int(port))
        case _:
            sys.exit(__doc__)


class Failed(Exception):
    pass


async def check_client(target: Any) -> int:
    from mcp.client.client import Client

    async def on_elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "purra"})

    passed = 0

    def ok(name: str) -> None:
        nonlocal passed
        passed += 1
        print(f"ok {name}", flush=True)

    async with Client(target, mode="auto", elicitation_callback=on_elicit, read_timeout_seconds=20) as c:
        if c.session.protocol_version != MODERN:
            raise Failed(f"discover: spoke {c.session.protocol_version}, not {MODERN}")
        ok("discover")

        r = await c.call_tool("echo", {"text": "hello"})
        text = r.content[0].text if r.content and r.content[0].type == "text" else None
        if text != "hello":
            raise Failed(f"echo: got {r}")
        ok("echo")

        r = await c.call_tool("elicit", {"message": "Who are you?"})
        text = r.content[0].text if r.content and r.content[0].type == "text" else None
        if text != "accept:purra":
            raise Failed(f"elicit-input-required: got {r}")
        ok("elicit-input-required")

        first = await c.session.call_tool("elicit", {"message": "Who are you?"}, allow_input_required=True)
        if not isinstance(first, types.InputRequiredResult) or not first.request_state or not first.input_requests:
            raise Failed(f"tampered-state: expected input_required with a requestState, got {first}")
        state = first.request_state
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        answers = {key: types.ElicitResult(action="accept", content={"name": "x"}) for key in first.input_requests}
        try:
            got = await c.session.call_tool(
                "elicit",
                {"message": "Who are you?"},
                input_responses=answers,
                request_state=tampered,
                allow_input_required=True,
            )
            raise Failed(f"tampered-state: a tampered requestState was accepted: {got}")
        except MCPError as e:
            if e.code != types.INVALID_PARAMS:
                raise Failed(f"tampered-state: expected -32602, got {e.code} {e}") from e
        ok("tampered-state")

        async with c.listen(tools_list_changed=True) as sub:
            if not sub.honored.tools_list_changed:
                raise Failed(f"listen-list-changed: tools changes not honoured: {sub.honored}")
            await c.call_tool("add_tool", {"name": "late"})
            with anyio.fail_after(10):
                event = await sub.__anext__()
            if type(event).__name__ != "ToolsListChanged":
                raise Failed(f"listen-list-changed: got {event}")
            names: list[str] = []
            cursor = None
            for _ in range(50):
                page = await c.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
            if "late" not in names:
                raise Failed(f"listen-list-changed: late is not listed: {names}")
        ok("listen-list-changed")
    return passed


def client(argv: list[str]) -> None:
    match argv:
        case ["--", command, *args]:
            from mcp.client.stdio import StdioServerParameters

            target: Any = StdioServerParameters(command=command, args=args)
        case [url]:
            target = url
        case _:
            sys.exit(__doc__)
    try:
        passed = anyio.run(check_client, target)
    except Failed as e:
        print(f"FAIL {e}", flush=True)
        sys.exit(1)
    except BaseExceptionGroup as group:
        failed = group.subgroup(Failed)
        if failed is None:
            raise
        first = failed.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        print(f"FAIL {first}", flush=True)
        sys.exit(1)
    print(f"modern-client: {passed} passed, 0 failed", flush=True)


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["server", *rest]:
            serve(rest)
        case ["client", *rest]:
            client(rest)
        case _:
            sys.exit(__doc__)
