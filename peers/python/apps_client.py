# An MCP Apps client on the official Python SDK 2.3.0: what it sees of a server's Apps, for purra's interop tests.
"""Usage: apps_client.py -- <server command> [args...]

Declares `io.modelcontextprotocol/ui` with the app MIME type, then prints one line per fact:
the server's extensions, each tool's UI binding, each bound UI resource as read (MIME type,
size, `_meta.ui`), and the text of calling each bound tool with `{"text": "hello"}` when it takes
a text, else `{}`.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID


async def main(command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, extensions={EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}) as session:
            init = await session.initialize()
            extensions = sorted((init.capabilities.extensions or {}).keys())
            print(f"extensions: {', '.join(extensions)}")
            tools = (await session.list_tools()).tools
            for tool in tools:
                ui = ((tool.meta or {}).get("ui") or {}).get("resourceUri")
                if ui is None:
                    continue
                print(f"tool {tool.name} ui: {ui}")
                contents = (await session.read_resource(ui)).contents
                for c in contents:
                    meta = json.dumps((c.meta or {}).get("ui"), sort_keys=True)
                    print(f"resource {c.uri}: {c.mime_type}, {len(c.text)} chars, ui {meta}")
                props = (tool.input_schema or {}).get("properties", {})
                args = {"text": "hello"} if "text" in props else {}
                result = await session.call_tool(tool.name, args)
                print(f"call {tool.name}: {result.content[0].text}")


if __name__ == "__main__":
    argv = sys.argv[1:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    anyio.run(main, argv[1:])
