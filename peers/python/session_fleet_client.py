# One long session through a load balancer without stickiness, on the official Python MCP SDK 2.3.0.
"""Makes many reads in ONE session through a round-robin load balancer in front of several purra
gateways that keep their sessions in a shared store, and reports what it saw: every answer
checked against the expected value, how many `initialize` requests it sent (one: the session is
never started again), which instance answered each request (the load balancer names it in the
`X-Purra-Instance` response header).

Usage: session_fleet_client.py --http URL --expect VALUE [--name NAME]

Commands, one JSON object a line on stdin:
  {"reads": N, "batch": B}   calls `get_value` N times on the session; prints
      {"event": "progress", "batch": B, "done": K} every 50 calls, then
      {"step": "reads", "batch": B, "ok": K, "wrong": [...], "retried": R, "reattached": T,
       "initializes": I, "sessions": [ids seen], "instances": {name: answers}}
    A read cut by a failure that is not about the session (a 502 as an instance dies) is made
    again on the same session, at most 5 times (counted in `retried`); a 404 for the session is
    reported in `wrong` and ends the batch: the client never starts a new session. A POST cut
    without any response fails the SDK's whole transport (its task group), not the one call:
    the client then opens its transport again on the same session (its id and revision sent as
    headers, no `initialize`; at most 5 times, counted in `reattached`) and goes on with the batch.
  {"quit": true}             ends.
Prints {"event": "ready", "session": S} once initialized.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import Counter
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

CALL_TIMEOUT = 30.0
MAX_TRIES = 5
# How many times the session's transport may be opened again (see the module's docstring).
MAX_REATTACH = 5


def emit(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, sort_keys=True), flush=True)


async def run(opts: argparse.Namespace) -> None:
    initializes = 0
    sessions: list[str] = []
    instances: Counter[str] = Counter()
    # The session once initialized: its id and negotiated revision, sent as headers by a
    # transport opened again on it.
    attached: dict[str, str] = {}
    reattached = 0
    # The batch under way, kept across a reattachment: its command, the next read, its counts.
    batch: dict[str, Any] | None = None

    async def on_request(request: httpx2.Request) -> None:
        nonlocal initializes
        if request.method == "POST":
            try:
                body = json.loads(request.content)
            except Exception:  # noqa: BLE001 - not a JSON body: not an initialize
                return
            if isinstance(body, dict) and body.get("method") == "initialize":
                initializes += 1

    async def on_response(response: httpx2.Response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in sessions:
            sessions.append(sid)
        if response.request.method == "POST":
            instances[response.headers.get("x-purra-instance", "?")] += 1

    async def reads(session: ClientSession) -> None:
        """Runs the batch under way to its end, then reports it."""
        nonlocal batch
        assert batch is not None
        b = batch
        while b["next"] < b["reads"]:
            n = b["next"]
            result = None
            for _ in range(MAX_TRIES):
                try:
                    with anyio.fail_after(CALL_TIMEOUT):
                        result = await session.call_tool("get_value", {})
                    break
                except Exception as err:  # noqa: BLE001 - classified
                    text = f"{type(err).__name__}: {err}"
                    if "Not Found" in text or "Session terminated" in text:
                        b["wrong"].append({"read": n, "error": text})
                        break
                    b["retried"] += 1
                    await anyio.sleep(0.2)
            if b["wrong"]:
                break
            got = None if result is None else result.structured_content
            if got == {"value": opts.expect} and not (result is not None and result.is_error):
                b["ok"] += 1
            else:
                b["wrong"].append({"read": n, "got": got})
            b["next"] = n + 1
            if (n + 1) % 50 == 0:
                emit({"event": "progress", "batch": b["batch"], "done": n + 1})
        emit(
            {
                "step": "reads",
                "batch": b["batch"],
                "ok": b["ok"],
                "wrong": b["wrong"],
                "retried": b["retried"],
                "reattached": reattached,
                "initializes": initializes,
                "sessions": sessions,
                "instances": dict(instances),
            }
        )
        batch = None

    async def serve(session: ClientSession) -> None:
        """Finishes the batch under way, then takes commands until `quit` or end of input."""
        nonlocal batch
        if batch is not None:
            await reads(session)
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                return
            command = json.loads(line)
            if command.get("quit"):
                return
            instances.clear()
            batch = {
                "batch": command.get("batch"),
                "reads": int(command["reads"]),
                "next": 0,
                "ok": 0,
                "retried": 0,
                "wrong": [],
            }
            await reads(session)

    while True:
        try:
            async with AsyncExitStack() as stack:
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        timeout=httpx2.Timeout(30.0, read=300.0),
                        headers=attached or None,
                        event_hooks={"request": [on_request], "response": [on_response]},
                    )
                )
                read, write = await stack.enter_async_context(
                    streamable_http_client(opts.http, http_client=http, terminate_on_close=False)
                )
                session = await stack.enter_async_context(
                    ClientSession(read, write, client_info=types.Implementation(name=opts.name, version="1.0.0"))
                )
                if not attached:
                    with anyio.fail_after(30):
                        init = await session.initialize()
                    if sessions:
                        attached["mcp-session-id"] = sessions[0]
                        attached["mcp-protocol-version"] = str(init.protocol_version)
                    emit({"event": "ready", "session": sessions[0] if sessions else None})
                await serve(session)
                break
        except Exception:
            # The SDK's transport runs each POST in a task of its own task group, so a POST cut
            # without a response (an instance killed under the load balancer) fails the whole
            # client, not the one call. The session lives on at the other instances: open the
            # transport again on it, without a new `initialize`, and go on with the batch.
            if not attached or reattached >= MAX_REATTACH:
                raise
            reattached += 1
            await anyio.sleep(0.2)
    emit({"event": "done"})


def main() -> None:
    parser = argparse.ArgumentParser(description="purra gateway session fleet client (official Python SDK)")
    parser.add_argument("--http", metavar="URL", required=True)
    parser.add_argument("--expect", required=True, help="the value every read must answer")
    parser.add_argument("--name", default="gateway-client-python")
    opts = parser.parse_args()
    try:
        anyio.run(run, opts)
    except BaseException as err:  # noqa: BLE001 - reported for the test, which decides
        while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
            err = err.exceptions[0]
        emit({"event": "failed", "error": f"{type(err).__name__}: {err}"})
        emit({"event": "done"})


if __name__ == "__main__":
    main()
