"""A resource server on the official Python MCP SDK for the token exchange tests.

Usage: exchange_upstream.py PORT ISSUER RECORD_FILE

A Streamable HTTP MCP server at http://127.0.0.1:PORT/mcp protected with the SDK's own auth
(`AuthSettings` and a `TokenVerifier`): a token must be an ES256 JWT signed by the authorization
server's JWKS (ISSUER/jwks.json), issued by ISSUER, unexpired, and its `aud` must name this
server's URL; anything else gets the SDK's 401. Every tool call appends one line
`<tool> <sub> <act.sub or -> <value or ->` to RECORD_FILE. Tools: `whoami` (read: answers `sub` and `act.sub`)
and `set_value` (write-like: records the value with the caller; answers the token's `iat` too). Prints `ready <URL>` when serving.
"""

from __future__ import annotations

import json
import threading
import os
import sys
import warnings

import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

warnings.filterwarnings("ignore")

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
RECORD = sys.argv[3]
URL = f"http://127.0.0.1:{PORT}/mcp"
JWKS = jwt.PyJWKClient(f"{ISSUER}/jwks.json")


class JwksVerifier:
    """Verifies idpyoidc's JWT access tokens: signature, issuer, expiry, and `aud` = this server."""

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = JWKS.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["ES256"], audience=URL, issuer=ISSUER)
        except Exception:
            return None
        scope = claims.get("scope", "")
        scopes = scope.split() if isinstance(scope, str) else list(scope)
        return AccessToken(
            token=token,
            client_id=claims.get("client_id", ""),
            scopes=scopes,
            expires_at=claims.get("exp"),
            resource=URL,
            subject=claims.get("sub"),
            claims=claims,
        )


def caller() -> tuple[str, str]:
    t = get_access_token()
    claims = (t.claims or {}) if t else {}
    act = claims.get("act") or {}
    return claims.get("sub") or "-", act.get("sub") or "-"


def record(tool: str, value: str = "-") -> tuple[str, str]:
    sub, act = caller()
    with open(RECORD, "a", encoding="utf-8") as f:
        f.write(f"{tool} {sub} {act} {value}\n")
    return sub, act


server = MCPServer(
    "exchange-upstream",
    token_verifier=JwksVerifier(),
    auth=AuthSettings(issuer_url=ISSUER, resource_server_url=URL, validate_token_resource=True),
)


@server.tool()
def whoami() -> str:
    """Who the token says is calling: {"sub": ..., "act": ...}."""
    sub, act = record("whoami")
    return json.dumps({"sub": sub, "act": act})


@server.tool()
def set_value(value: str) -> str:
    """Stores a value (a write), recorded with its caller; answers when its token was issued."""
    sub, act = record("set_value", value)
    t = get_access_token()
    iat = ((t.claims or {}) if t else {}).get("iat")
    return json.dumps({"sub": sub, "act": act, "value": value, "iat": iat})


if __name__ == "__main__":
    app = server.streamable_http_app(host="127.0.0.1")
    print(f"ready {URL}", flush=True)
    # Ends with the test binary that started it: when its stdin closes.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
