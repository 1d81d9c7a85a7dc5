"""A stdio MCP server on the official Python MCP SDK that takes its credential from the environment.

It reads `PURRA_TEST_TOKEN` at start and answers the tool `whoami` with the token's SHA-256 (hex), never
the token itself, so a test can tell which principal's secret a per-principal process was started with.
"""

from __future__ import annotations

import hashlib
import os
import warnings

from mcp.server.mcpserver import MCPServer

warnings.filterwarnings("ignore")

TOKEN = os.environ.get("PURRA_TEST_TOKEN", "")
server = MCPServer("token-env")


@server.tool()
def whoami() -> str:
    """The SHA-256 (hex) of PURRA_TEST_TOKEN, or `none` when it is unset."""
    return hashlib.sha256(TOKEN.encode()).hexdigest() if TOKEN else "none"


if __name__ == "__main__":
    server.run()
