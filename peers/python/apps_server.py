# An MCP Apps server on the official Python SDK 2.3.0 (`mcp.server.apps`), over stdio, for purra's CLI tests.
"""Apps fixture server `clock-app`: the tool `get_time` is bound to the app `ui://clock/app.html`."""

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.mcpserver import MCPServer

apps = Apps()


@apps.tool(resource_uri="ui://clock/app.html", description="The time on the fixture's clock")
def get_time() -> str:
    return "12:00"


apps.add_html_resource(
    "ui://clock/app.html",
    "<!doctype html><p id=clock>12:00</p>",
    name="Clock",
    csp=ResourceCsp(connect_domains=["https://time.example"]),
    prefers_border=False,
)

mcp = MCPServer("clock-app", extensions=[apps])

if __name__ == "__main__":
    mcp.run()
