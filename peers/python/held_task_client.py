# Interop fixture client built on the official Python MCP SDK 1.30.0 (its tasks client, which 2.x dropped; run with the
# second venv scripts/setup-peers.sh makes).
"""Calls a held write of a purra gateway as a 2025-11-25 task and follows the task on another
instance of the fleet; prints one JSON line per thing it saw.

Usage: held_task_client.py --call URL --poll URL --value VALUE [--cancel] [--token TOKEN]

- `created`: the task `tools/call` answered (through --call), with how long that took and the
  tool's listed task support;
- `status`: each change of the task's status or message seen by `tasks/get` through --poll (a
  second session, on another instance);
- with --cancel, `cancelled`: `tasks/cancel` (through --poll) once the task says it waits;
- `result` (the `tasks/result` answer through --poll) or `result_error`; then `done`.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

WAIT = 60.0  # seconds for the whole run

# The SDK 1.30 marks its tasks client deprecated (2.x dropped it); it is what this fixture tests.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


async def follow(poll: ClientSession, task_id: str, cancel: bool) -> str:
    last: tuple[str, str | None] | None = None
    asked_cancel = False
    while True:
        t = await poll.experimental.get_task(task_id)
        now = (t.status, t.statusMessage)
        if now != last:
            say(event="status", status=t.status, statusMessage=t.statusMessage)
            last = now
        if t.status in ("completed", "failed", "cancelled"):
            return t.status
        if cancel and not asked_cancel and (t.statusMessage or "").startswith("waiting for approval"):
            ack = await poll.experimental.cancel_task(task_id)
            say(event="cancelled", status=ack.status)
            asked_cancel = True
        await anyio.sleep(0.1)


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--call", required=True)
    p.add_argument("--poll", required=True)
    p.add_argument("--value", required=True)
    p.add_argument("--cancel", action="store_true")
    p.add_argument("--token", help="a bearer token sent with every request")
    a = p.parse_args()
    headers = {"Authorization": f"Bearer {a.token}"} if a.token else None
    with anyio.fail_after(WAIT):
        async with streamablehttp_client(a.call, headers=headers) as (r1, w1, _):
            async with ClientSession(r1, w1) as caller:
                init = await caller.initialize()
                tools = await caller.list_tools()
                support = {
                    t.name: (t.execution.taskSupport if t.execution else None) for t in tools.tools
                }
                start = time.monotonic()
                created = await caller.experimental.call_tool_as_task(
                    "set_value", {"value": a.value}, ttl=600000
                )
                say(
                    event="created",
                    protocol=init.protocolVersion,
                    serverTasks=init.capabilities.tasks is not None,
                    taskSupport=support.get("set_value"),
                    ms=int((time.monotonic() - start) * 1000),
                    taskId=created.task.taskId,
                    status=created.task.status,
                )
                async with streamablehttp_client(a.poll, headers=headers) as (r2, w2, _):
                    async with ClientSession(r2, w2) as poll:
                        await poll.initialize()
                        await follow(poll, created.task.taskId, a.cancel)
                        try:
                            result = await poll.experimental.get_task_result(
                                created.task.taskId, types.CallToolResult
                            )
                            say(
                                event="result",
                                result=result.model_dump(by_alias=True, exclude_none=True, mode="json"),
                            )
                        except McpError as e:
                            say(event="result_error", code=e.error.code, message=e.error.message)
                        listed = await poll.experimental.list_tasks()
                        say(event="listed", tasks=[t.taskId for t in listed.tasks])
    say(event="done")


if __name__ == "__main__":
    anyio.run(main)
