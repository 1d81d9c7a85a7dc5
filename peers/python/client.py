# Interop fixture client (peers/FIXTURES.md) built on the official Python MCP SDK 2.3.0 (ClientSession + stdio_client).
"""Runs the 20 fixture checks against a fixture server.

Usage: client.py [--protocol-version V]... -- <server command> [args...]
       client.py [--protocol-version V]... --http URL
       client.py [--protocol-version V]... --sse URL   (HTTP+SSE of 2024-11-05: the stream's URL)

With no --protocol-version the checks run for 2025-11-25, then 2025-06-18. Over stdio each run
spawns a fresh server process. Prints `ok <check>` per check, `FAIL <check>: <why>` (exit 1) on
the first failure, and `fixture-client: N passed, 0 failed` at the end.

FIXTURE_SERVER_IS_PURRA=1 makes the checks where FIXTURES.md lets SDK peers differ strict:
logging must deliver exactly `warning message` and `error message`, and invalid arguments must
come back as a result with isError (not a JSON-RPC error).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import TypeAdapter

# Logging, sampling, roots and resources/subscribe are deprecated only for the 2026-07-28 revision.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

DEFAULT_VERSIONS = ["2025-11-25", "2025-06-18"]
WAIT = 5.0  # seconds for any single request or awaited notification
RUN_TIMEOUT = 30.0  # seconds for one whole run of the 20 checks
STRICT = os.environ.get("FIXTURE_SERVER_IS_PURRA") == "1"
RAW = TypeAdapter(dict[str, Any])  # result adapter that returns the wire dict untouched

ALL_TOOLS = [
    "echo", "add", "fail", "progress", "block", "cancellations",
    "log", "sample", "elicit", "roots", "add_tool", "touch",
]  # fmt: skip


class CheckFailed(Exception):
    pass


def expect(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


def texts(res: types.CallToolResult) -> list[str]:
    return [c.text for c in res.content if isinstance(c, types.TextContent)]


def only_text(res: types.CallToolResult) -> str:
    t = texts(res)
    expect(len(res.content) == 1 and len(t) == 1, f"expected one text block, got {res.content!r}")
    return t[0]


class Inbox:
    """Notifications and log messages the server sent, for the checks to wait on."""

    def __init__(self) -> None:
        self.notes: list[types.ServerNotification] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def on_message(self, msg: Any) -> None:
        if isinstance(msg, Exception):
            print(f"fixture-client: transport error: {msg!r}", file=sys.stderr)
            return
        self.notes.append(msg)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def wait_for(self, pred: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
        with anyio.move_on_after(timeout):
            while not pred():
                await anyio.sleep(0.01)
            return
        raise CheckFailed(f"{what} did not arrive within {timeout:g} s")


# ---- client handlers (FIXTURES.md "Client handlers") ----
async def on_sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    content = params.messages[-1].content
    blocks = content if isinstance(content, list) else [content]
    last = "".join(b.text for b in blocks if isinstance(b, types.TextContent))
    return types.CreateMessageResult.model_validate(
        {
            "role": "assistant",
            "content": {"type": "text", "text": "echo:" + last},
            "model": "fixture-model",
            "stopReason": "endTurn",
        }
    )


async def on_elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "purra"})


async def on_roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///tmp/fixture-root", "name": "fixture"}]})


async def initialize(session: ClientSession, version: str) -> types.InitializeResult:
    # ClientSession.initialize() always offers mcp_types.version.LATEST_HANDSHAKE_VERSION and has
    # no parameter for it. Rather than patching that module constant, we do what initialize()
    # does with public API only: send the initialize request with the version we want, hand the
    # result to ClientSession.adopt() (which installs the negotiated version, e.g. for the
    # MCP-Protocol-Version header on HTTP) and send notifications/initialized.
    capabilities = types.ClientCapabilities.model_validate(
        {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True}}
    )
    result = await session.send_request(
        types.InitializeRequest(
            params=types.InitializeRequestParams(
                protocol_version=version,
                capabilities=capabilities,
                client_info=types.Implementation(name="fixture-client-python", version="1.0.0"),
            )
        ),
        types.InitializeResult,
    )
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())
    return result


async def all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise CheckFailed("tools/list did not end after 100 pages")


class Run:
    def __init__(self, session: ClientSession, inbox: Inbox, version: str, index: int, fresh_server: bool):
        self.s = session
        self.inbox = inbox
        self.version = version
        self.index = index
        self.fresh_server = fresh_server

    async def call(self, name: str, args: dict[str, Any] | None = None, **kw: Any) -> types.CallToolResult:
        with anyio.fail_after(WAIT):
            return await self.s.call_tool(name, args or {}, **kw)

    async def c_initialize(self) -> None:
        with anyio.fail_after(WAIT):
            res = await initialize(self.s, self.version)
        expect(res.server_info.name.startswith("fixture-"), f"server name {res.server_info.name!r}")
        caps = res.capabilities
        expect(caps.tools is not None, "no tools capability")
        expect(caps.resources is not None and caps.resources.subscribe is True, "no resources.subscribe capability")
        expect(caps.prompts is not None, "no prompts capability")
        expect(caps.logging is not None, "no logging capability")
        expect(caps.completions is not None, "no completions capability")
        expect(res.protocol_version == self.version, f"negotiated {res.protocol_version}, asked {self.version}")

    async def c_ping(self) -> None:
        with anyio.fail_after(WAIT):
            raw = await self.s.send_request(types.PingRequest(), RAW)
        expect(raw == {}, f"ping returned {raw!r}")

    async def c_tools_list(self) -> None:
        with anyio.fail_after(WAIT):
            tools = await all_tools(self.s)
        by_name = {t.name: t for t in tools}
        missing = [n for n in ALL_TOOLS if n not in by_name]
        expect(not missing, f"missing tools {missing}")
        schema = by_name["add"].output_schema or {}
        expect(schema.get("type") == "object", f"add outputSchema {schema!r}")
        expect((schema.get("properties") or {}).get("sum", {}).get("type") == "number", f"add outputSchema {schema!r}")
        expect(schema.get("required") == ["sum"], f"add outputSchema required {schema.get('required')!r}")

    async def c_echo(self) -> None:
        res = await self.call("echo", {"text": "hello"})
        expect(not res.is_error, "echo returned isError")
        expect(only_text(res) == "hello", f"echo gave {texts(res)!r}")

    async def c_structured(self) -> None:
        res = await self.call("add", {"a": 2, "b": 3})
        expect(not res.is_error, "add returned isError")
        expect(res.structured_content == {"sum": 5}, f"structuredContent {res.structured_content!r}")
        expect(len(texts(res)) >= 1, "add has no text block")

    async def c_is_error(self) -> None:
        res = await self.call("fail")
        expect(res.is_error is True, "fail did not set isError")
        expect(only_text(res) == "fixture failure", f"fail gave {texts(res)!r}")

    async def c_invalid_arguments(self) -> None:
        try:
            res = await self.call("echo", {})
        except MCPError as err:
            expect(not STRICT, f"purra must answer with an isError result, got JSON-RPC error {err.error.code}")
            return
        expect(res.is_error is True, f"echo {{}} succeeded: {texts(res)!r}")

    async def c_resources_pages(self) -> None:
        pages, uris, cursor = 0, [], None
        with anyio.fail_after(WAIT):
            while True:
                page = await self.s.list_resources(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                pages += 1
                uris.extend(str(r.uri) for r in page.resources)
                cursor = page.next_cursor
                if not cursor or pages > 50:
                    break
        want = [f"fixture://static/{n}" for n in range(1, 6)] + ["fixture://watched"]
        expect(pages >= 3, f"only {pages} page(s)")
        expect(sorted(uris) == sorted(want), f"resources {uris}")

    async def read_text(self, uri: str) -> str:
        with anyio.fail_after(WAIT):
            res = await self.s.read_resource(uri)
        expect(len(res.contents) == 1, f"{uri}: {len(res.contents)} contents")
        content = res.contents[0]
        expect(isinstance(content, types.TextResourceContents), f"{uri}: not text contents")
        return content.text

    async def c_resource_read(self) -> None:
        got = await self.read_text("fixture://static/3")
        expect(got == "static 3", f"read gave {got!r}")

    async def c_templates(self) -> None:
        with anyio.fail_after(WAIT):
            res = await self.s.list_resource_templates()
        found = [t.uri_template for t in res.resource_templates]
        expect("fixture://items/{id}" in found, f"templates {found}")
        got = await self.read_text("fixture://items/42")
        expect(got == "item 42", f"read gave {got!r}")

    async def c_subscribe(self) -> None:
        uri = "fixture://watched"
        with anyio.fail_after(WAIT):
            await self.s.subscribe_resource(uri)
        start = len(self.inbox.notes)
        res = await self.call("touch", {"uri": uri})
        expect(only_text(res) == f"touched {uri}", f"touch gave {texts(res)!r}")

        def arrived() -> bool:
            return any(
                isinstance(n, types.ResourceUpdatedNotification) and str(n.params.uri) == uri
                for n in self.inbox.notes[start:]
            )

        await self.inbox.wait_for(arrived, f"notifications/resources/updated for {uri}")
        with anyio.fail_after(WAIT):
            await self.s.unsubscribe_resource(uri)

    async def c_prompt(self) -> None:
        for args, want in (({"name": "Ada"}, "Hello, Ada!"), ({"name": "Ada", "style": "loud"}, "HELLO, ADA!")):
            with anyio.fail_after(WAIT):
                res = await self.s.get_prompt("greet", args)
            expect(len(res.messages) == 1, f"greet {args}: {len(res.messages)} messages")
            msg = res.messages[0]
            expect(msg.role == "user", f"greet {args}: role {msg.role}")
            expect(isinstance(msg.content, types.TextContent), f"greet {args}: not text")
            expect(msg.content.text == want, f"greet {args}: {msg.content.text!r}")

    async def c_completion(self) -> None:
        with anyio.fail_after(WAIT):
            res = await self.s.complete(types.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "al"})
        expect(res.completion.values == ["alice", "alan"], f"completion {res.completion.values}")

    async def c_logging(self) -> None:
        with anyio.fail_after(WAIT):
            await self.s.set_logging_level("warning")
        start = len(self.inbox.logs)
        res = await self.call("log")
        expect(only_text(res) == "logged", f"log gave {texts(res)!r}")
        wanted = ["warning message", "error message"]

        def got() -> list[Any]:
            return [m.data for m in self.inbox.logs[start:]]

        await self.inbox.wait_for(lambda: all(w in got() for w in wanted), "warning and error log messages")
        await anyio.sleep(0.1)  # let any stragglers in before the exact comparison
        for m in self.inbox.logs[start:]:
            expect(m.logger == "fixture", f"log logger {m.logger!r}")
            expect(m.data == f"{m.level} message", f"log level {m.level} with data {m.data!r}")
        if STRICT:
            expect(got() == wanted, f"logs {got()}, want exactly {wanted}")

    async def c_progress(self) -> None:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        res = await self.call("progress", {"steps": 3}, progress_callback=on_progress)
        expect(only_text(res) == "done 3", f"progress gave {texts(res)!r}")
        await self.inbox.wait_for(lambda: len(seen) >= 3, "3 progress notifications")
        await anyio.sleep(0.05)
        want = [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        expect(seen == want, f"progress {seen}, want {want}")

    async def cancellations(self) -> int:
        return int(only_text(await self.call("cancellations")))

    async def c_cancellation(self) -> None:
        before = await self.cancellations()
        if self.fresh_server:
            expect(before == 0, f"fresh server reports {before} cancellations")
        outcome: list[Any] = []

        async def blocker(scope: anyio.CancelScope) -> None:
            with scope:
                # Cancelling the scope around an in-flight request makes the SDK's dispatcher
                # send notifications/cancelled for it (its "courtesy cancel").
                outcome.append(await self.s.call_tool("block", {}))

        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()
            tg.start_soon(blocker, scope)
            await anyio.sleep(0.2)
            scope.cancel()
        expect(not outcome, f"block returned before it was cancelled: {outcome!r}")
        want = before + 1
        last: list[int] = []

        async def counted() -> bool:
            last.append(await self.cancellations())
            return last[-1] == want

        with anyio.move_on_after(WAIT):
            while not await counted():
                await anyio.sleep(0.05)
            return
        raise CheckFailed(f"cancellations is {last[-1] if last else '?'}, want {want}")

    async def c_sampling(self) -> None:
        res = await self.call("sample", {"prompt": "hi"})
        expect(only_text(res) == "echo:hi", f"sample gave {texts(res)!r}")

    async def c_elicitation(self) -> None:
        res = await self.call("elicit", {"message": "name?"})
        expect(only_text(res) == "accept:purra", f"elicit gave {texts(res)!r}")

    async def c_roots(self) -> None:
        res = await self.call("roots")
        expect(only_text(res) == "file:///tmp/fixture-root", f"roots gave {texts(res)!r}")

    async def c_list_changed(self) -> None:
        name = f"dynamic_{self.index + 1}"
        start = len(self.inbox.notes)
        res = await self.call("add_tool", {"name": name})
        expect(only_text(res) == f"added {name}", f"add_tool gave {texts(res)!r}")
        await self.inbox.wait_for(
            lambda: any(isinstance(n, types.ToolListChangedNotification) for n in self.inbox.notes[start:]),
            "notifications/tools/list_changed",
        )
        with anyio.fail_after(WAIT):
            names = [t.name for t in await all_tools(self.s)]
        expect(name in names, f"{name} not in tools/list {names}")

    def checks(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        return [
            ("initialize", self.c_initialize),
            ("ping", self.c_ping),
            ("tools-list", self.c_tools_list),
            ("echo", self.c_echo),
            ("structured", self.c_structured),
            ("is-error", self.c_is_error),
            ("invalid-arguments", self.c_invalid_arguments),
            ("resources-pages", self.c_resources_pages),
            ("resource-read", self.c_resource_read),
            ("templates", self.c_templates),
            ("subscribe", self.c_subscribe),
            ("prompt", self.c_prompt),
            ("completion", self.c_completion),
            ("logging", self.c_logging),
            ("progress", self.c_progress),
            ("cancellation", self.c_cancellation),
            ("sampling", self.c_sampling),
            ("elicitation", self.c_elicitation),
            ("roots", self.c_roots),
            ("list-changed", self.c_list_changed),
        ]


def fail(check: str, why: str) -> None:
    print(f"FAIL {check}: {why}", flush=True)
    sys.exit(1)


def leaf(err: BaseException) -> BaseException:
    # anyio task groups (the SDK's transports and session) may wrap what a check raised.
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    return err


async def run_once(opts: argparse.Namespace, version: str, index: int) -> int:
    inbox = Inbox()
    passed = 0
    current = "connect"
    try:
        with anyio.fail_after(RUN_TIMEOUT):
            async with AsyncExitStack() as stack:
                if opts.http:
                    from mcp.client.streamable_http import streamable_http_client

                    read, write = await stack.enter_async_context(streamable_http_client(opts.http))
                elif opts.sse:
                    from mcp.client.sse import sse_client

                    read, write = await stack.enter_async_context(sse_client(opts.sse))
                else:
                    params = StdioServerParameters(
                        command=opts.command[0], args=opts.command[1:], env=dict(os.environ)
                    )
                    read, write = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        sampling_callback=on_sampling,
                        elicitation_callback=on_elicitation,
                        list_roots_callback=on_roots,
                        logging_callback=inbox.on_log,
                        message_handler=inbox.on_message,
                    )
                )
                run = Run(session, inbox, version, index, fresh_server=not (opts.http or opts.sse))
                for name, check in run.checks():
                    current = name
                    await check()
                    print(f"ok {name}", flush=True)
                    passed += 1
                current = "shutdown"
    except Exception as raised:  # anything a check or the SDK raised fails the current check
        err = leaf(raised)
        if isinstance(err, CheckFailed):
            fail(current, f"[{version}] {err}")
        elif isinstance(err, TimeoutError):
            fail(current, f"[{version}] timed out (5 s per wait, {RUN_TIMEOUT:g} s per run)")
        elif isinstance(err, MCPError):
            fail(current, f"[{version}] JSON-RPC error {err.error.code}: {err.error.message}")
        else:
            fail(current, f"[{version}] {type(err).__name__}: {err}")
    return passed


def parse_args(argv: list[str]) -> argparse.Namespace:
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description="purra interop fixture client (official Python SDK)",
        usage="client.py [--protocol-version V]... (-- <server command> [args...] | --http URL | --sse URL)",
    )
    parser.add_argument("--protocol-version", action="append", dest="versions", metavar="V")
    parser.add_argument("--http", metavar="URL", help="connect to a Streamable HTTP endpoint instead of spawning")
    parser.add_argument("--sse", metavar="URL", help="connect to an HTTP+SSE server's event stream instead")
    opts = parser.parse_args(argv)
    opts.command = command
    if [bool(opts.http), bool(opts.sse), bool(command)].count(True) != 1:
        parser.error("give exactly one of `-- <server command>`, `--http URL` or `--sse URL`")
    opts.versions = opts.versions or DEFAULT_VERSIONS
    return opts


def main() -> None:
    opts = parse_args(sys.argv[1:])
    total = 0
    for index, version in enumerate(opts.versions):
        total += anyio.run(run_once, opts, version, index)
    print(f"fixture-client: {total} passed, 0 failed", flush=True)


if __name__ == "__main__":
    main()
