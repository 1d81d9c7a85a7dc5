# Interop fixture client built on the official Python MCP SDK 1.30.0 (its tasks client, which 2.x dropped; run with the
# second venv scripts/setup-peers.sh makes).
"""Runs 2025-11-25 tasks on a server (purra's conformance server in
crates/purra-conformance/tests/it/tasks_interop.rs) and prints one JSON document of what it saw: a
task that asks for confirmation (input_required, answered by the elicitation callback while
tasks/result waits; the statuses the server notified, in order), a task cancelled while it runs,
tasks/list, and an unknown task's error.

Usage: task_client.py --http URL
       task_client.py -- <server command> [args...]
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

WAIT = 20.0  # seconds for the whole run


def notified_statuses(notified: list[tuple[str, str]], task_id: str) -> list[str]:
    """The statuses notified for `task_id`, a repeat of the previous one left out."""
    out: list[str] = []
    for tid, status in notified:
        if tid == task_id and (not out or out[-1] != status):
            out.append(status)
    return out


async def run(session: ClientSession, asked: list[str], notified: list[tuple[str, str]]) -> dict[str, Any]:
    init = await session.initialize()
    tasks = session.experimental

    # A task that asks for confirmation: poll until it needs input, then tasks/result (the
    # server's elicitation reaches the callback meanwhile).
    created = await tasks.call_tool_as_task("confirm_delete", {"filename": "a.txt"}, ttl=60000)
    confirm_id = created.task.taskId
    async for status in tasks.poll_task(confirm_id):
        if status.status == "input_required":
            break
    result = await tasks.get_task_result(confirm_id, types.CallToolResult)
    after = await tasks.get_task(confirm_id)
    # The last notification may travel on another stream than the result: wait for it.
    with anyio.move_on_after(5):
        while "completed" not in notified_statuses(notified, confirm_id):
            await anyio.sleep(0.02)
    confirm = {
        "created": created.task.status,
        "notified": notified_statuses(notified, confirm_id),
        "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"),
        "after": after.status,
        "ttl": after.ttl,
        "same_id": result.meta is not None
        and result.meta.get("io.modelcontextprotocol/related-task", {}).get("taskId") == confirm_id,
    }

    # A task cancelled while it runs: its result is then an error.
    created = await tasks.call_tool_as_task("slow_compute", {"seconds": 60})
    slow_id = created.task.taskId
    cancelled = await tasks.cancel_task(slow_id)
    now = await tasks.get_task(slow_id)
    try:
        await tasks.get_task_result(slow_id, types.CallToolResult)
        result_error: Any = None
    except McpError as e:
        result_error = {"code": e.error.code, "message": e.error.message.replace(slow_id, "ID")}
    cancel = {
        "created": created.task.status,
        "ack": cancelled.status,
        "after": now.status,
        "result_error": result_error,
    }

    listed = await tasks.list_tasks()
    try:
        await tasks.get_task("no-such-task")
        unknown: Any = None
    except McpError as e:
        unknown = {"code": e.error.code, "message": e.error.message}
    return {
        "protocol": init.protocolVersion,
        "server_tasks": init.capabilities.tasks is not None
        and init.capabilities.tasks.requests is not None
        and init.capabilities.tasks.requests.tools is not None,
        "asked": asked,
        "confirm": confirm,
        "cancel": cancel,
        "listed": sorted(t.status for t in listed.tasks),
        "unknown": unknown,
    }


async def main() -> None:
    args = sys.argv[1:]
    asked: list[str] = []
    notified: list[tuple[str, str]] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.TaskStatusNotification):
            notified.append((message.root.params.taskId, message.root.params.status))

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with anyio.fail_after(WAIT):
        if args[:1] == ["--http"] and len(args) == 2:
            async with streamablehttp_client(args[1]) as (read, write, _):
                async with ClientSession(
                    read, write, elicitation_callback=elicit, message_handler=on_message
                ) as session:
                    out = await run(session, asked, notified)
        elif args[:1] == ["--"] and len(args) >= 2:
            server = StdioServerParameters(command=args[1], args=args[2:])
            async with stdio_client(server) as (read, write):
                async with ClientSession(
                    read, write, elicitation_callback=elicit, message_handler=on_message
                ) as session:
                    out = await run(session, asked, notified)
        else:
            sys.exit(__doc__)
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main)
