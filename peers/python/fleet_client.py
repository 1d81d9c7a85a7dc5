# A long-lived downstream client for the gateway fleet test, on the official Python MCP SDK 2.3.0.
"""Calls tools through a load balancer in front of several purra gateways, and survives the death
of the instance its session lives on by the specification's rule: a request answered 404 for its
session means the session is gone; the client starts a new one (a new `initialize`, without a
session id) and makes its call again.

Usage: fleet_client.py --http URL [--name NAME]

Commands, one JSON object a line on stdin:
  {"call": NAME, "args": {...}, "tag": T}   calls the tool; prints, as it goes,
      {"event": "progress", "tag": T, "message": M, "instance": I}
      {"event": "call_failed", "tag": T, "error": E}    the call's stream was cut; the session is
                                                        asked (pinged) whether it still exists
      {"event": "session_lost", "tag": T, "error": E}   a ping was answered 404: the session is gone
      {"event": "initialized", "instance": I, "session": S}   the new session
      {"event": "repeat", "tag": T}                     the call, made again on it
    and at the end {"step": "call", "tag": T, "result": CallToolResult, "instance": I, "tries": N}
    or {"step": "call", "tag": T, "error": E} after 5 tries.
  {"quit": true}                            ends.

While a call waits, the client pings its session every 100 ms on separate requests: that is how
it learns its instance died (the load balancer, sticky by session, sends the ping to a live
instance, which answers 404 for a session it does not know, or, when the gateways keep sessions
in their store, answers from another instance than the call's: the call is then made again on the
same session), instead of waiting for its SSE stream's reconnection attempts. Only a 404 ends a session (or the SDK closing the session's transport for good, "Connection
closed": nothing can be sent on it any more); any other failure (a request cut as its instance died, a
502 from the load balancer) is not an answer about the session, and a call cut that way is made
again on the same session when the session still answers. `I` is what the load balancer put in the `X-Purra-Instance` response header of the
session's `initialize`, then of its latest answered POST (the test's HAProxy names the server there).
Prints {"event": "initialized", ...} once connected, then {"event": "ready"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

CALL_TIMEOUT = 120.0
PING_EVERY = 0.1
MAX_TRIES = 5


def emit(doc: dict[str, Any]) -> None:
    print(json.dumps(doc, sort_keys=True), flush=True)


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Fleet:
    def __init__(self, url: str, name: str, tg: Any) -> None:
        self.url = url
        self.name = name
        self.tg = tg
        self.session: ClientSession | None = None
        self.close: anyio.Event | None = None
        self.instance: str | None = None
        self.session_id: str | None = None

    async def run_session(self, close: anyio.Event, *, task_status: Any) -> None:
        """One session, in a task of its own: its transport's tasks belong to it, so a transport
        that fails ends this task, never the caller's."""
        seen: dict[str, str] = {}

        async def on_response(response: httpx2.Response) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid and "session" not in seen:
                seen["session"] = sid
                seen["instance"] = response.headers.get("x-purra-instance", "")
            elif started and response.request.method == "POST" and response.headers.get("x-purra-instance"):
                # A session kept in the gateways' store moves to another instance when its own
                # dies: the instance that answered last is where its requests go now.
                self.instance = response.headers["x-purra-instance"]

        started = False
        try:
            async with AsyncExitStack() as stack:
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        timeout=httpx2.Timeout(30.0, read=300.0),
                        event_hooks={"response": [on_response]},
                    )
                )
                read, write = await stack.enter_async_context(
                    streamable_http_client(self.url, http_client=http, terminate_on_close=False)
                )
                session = await stack.enter_async_context(
                    ClientSession(read, write, client_info=types.Implementation(name=self.name, version="1.0.0"))
                )
                with anyio.fail_after(30):
                    await session.initialize()
                self.session = session
                self.instance, self.session_id = seen.get("instance"), seen.get("session")
                started = True
                task_status.started(None)
                await close.wait()
        except Exception as err:  # noqa: BLE001 - the session ended; the caller learns it
            if not started:
                task_status.started(err)

    async def connect(self) -> None:
        if self.close is not None:
            # The old session ends: its requests are abandoned, nothing is sent to end it (its
            # instance is gone).
            self.close.set()
        self.session = None
        self.close = anyio.Event()
        failed = await self.tg.start(self.run_session, self.close)
        if failed is not None:
            raise failed
        emit({"event": "initialized", "instance": self.instance, "session": self.session_id})

    async def call(self, name: str, args: dict[str, Any], tag: Any) -> None:
        tries = 0
        while True:
            tries += 1
            session = self.session
            assert session is not None
            outcome: dict[str, Any] = {}

            async def progress(value: float, total: float | None, message: str | None) -> None:
                outcome.setdefault("at", self.instance)
                emit({"event": "progress", "tag": tag, "message": message, "instance": self.instance})

            async with anyio.create_task_group() as tg:

                async def calling() -> None:
                    try:
                        with anyio.fail_after(CALL_TIMEOUT):
                            res = await session.call_tool(name, args, progress_callback=progress)
                        outcome.setdefault("result", res)
                    except Exception as err:  # noqa: BLE001 - the stream was cut: asked below
                        outcome.setdefault("failed", f"call: {type(err).__name__}: {err}")
                    tg.cancel_scope.cancel()

                async def watchdog() -> None:
                    while True:
                        await anyio.sleep(PING_EVERY)
                        lost = await ping(session)
                        if lost:
                            outcome.setdefault("lost", lost)
                            tg.cancel_scope.cancel()
                            return
                        at = outcome.get("at")
                        if lost is None and at is not None and self.instance != at:
                            # The session answers from another instance (it is kept in the
                            # gateways' store): the call's own instance is gone, and its stream
                            # with it; the call is made again on the session.
                            outcome.setdefault("failed", f"moved from {at} to {self.instance}")
                            tg.cancel_scope.cancel()
                            return

                tg.start_soon(calling)
                tg.start_soon(watchdog)
            if "result" in outcome and "lost" not in outcome:
                emit(
                    {
                        "step": "call",
                        "tag": tag,
                        "result": dump(outcome["result"]),
                        "instance": self.instance,
                        "tries": tries,
                    }
                )
                return
            if tries >= MAX_TRIES:
                emit({"step": "call", "tag": tag, "error": outcome.get("lost") or outcome.get("failed")})
                return
            lost = outcome.get("lost")
            if lost is None:
                # The call failed without a 404: ask the session whether it still exists.
                emit({"event": "call_failed", "tag": tag, "error": outcome.get("failed", "")})
                for _ in range(100):
                    lost = await ping(session)
                    if lost is not False:
                        break
                    await anyio.sleep(PING_EVERY)
                if not lost:
                    # The session lives (or never answered): the same call again on it.
                    emit({"event": "repeat", "tag": tag})
                    continue
            emit({"event": "session_lost", "tag": tag, "error": lost})
            # The specification's rule: a 404 for the session means a new session, then the call
            # again (the gateway finds the call's approval, claim or receipt in the store).
            for attempt in range(50):
                try:
                    await self.connect()
                    break
                except Exception as err:  # noqa: BLE001 - no instance ready yet: try again
                    if attempt == 49:
                        emit({"step": "call", "tag": tag, "error": f"reconnect: {err}"})
                        return
                    await anyio.sleep(0.1)
            emit({"event": "repeat", "tag": tag})


async def ping(session: ClientSession) -> str | bool | None:
    """Pings the session: `None` when it answers, the error's text when it answered 404 (the
    session is gone), `False` for any other failure (a request cut as its instance died, a 502
    from the load balancer: not an answer about the session)."""
    try:
        with anyio.fail_after(10):
            await session.send_ping()
        return None
    except Exception as err:  # noqa: BLE001 - classified
        text = f"ping: {type(err).__name__}: {err}"
        # A 404 ends the session; so does the SDK's session object closing its transport for
        # good ("Connection closed": its streams gave up after the instance died): nothing can
        # be sent on it any more, so a new session is the only way on.
        if "Not Found" in text or "Session terminated" in text or "Connection closed" in text:
            return text
        return False


async def run(opts: argparse.Namespace) -> None:
    async with anyio.create_task_group() as tg:
        fleet = Fleet(opts.http, opts.name, tg)
        await fleet.connect()
        emit({"event": "ready"})
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            command = json.loads(line)
            if command.get("quit"):
                break
            await fleet.call(command["call"], command.get("args", {}), command.get("tag"))
        emit({"event": "done"})
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description="purra gateway fleet test client (official Python SDK)")
    parser.add_argument("--http", metavar="URL", required=True)
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
