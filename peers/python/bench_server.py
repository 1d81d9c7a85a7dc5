# The one-tool benchmark server written with the official Python SDK 2.3.0 as its README shows (MCPServer, @tool).
"""Benchmark server `bench-python`: echo {text} and add {a, b} (structured {sum}).

Usage: bench_server.py             (stdio)
       bench_server.py --http PORT (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp)

The log level is WARNING so that the SDK's per-request INFO log line is not what is measured.
"""

import sys

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

mcp = MCPServer("bench-python", log_level="WARNING")


class Sum(BaseModel):
    sum: float


@mcp.tool(description="Echo the text")
def echo(text: str) -> str:
    return text


@mcp.tool(description="Add two numbers")
def add(a: float, b: float) -> Sum:
    return Sum(sum=a + b)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) == 1:
        mcp.run()
    else:
        sys.exit("usage: bench_server.py [--http PORT]")
