"""An idpyoidc (PyPI) authorization server for the token exchange tests (RFC 8693).

Usage: server.py PORT GATEWAY_KEY_OUT [--lifetime SECONDS]

Serves on 127.0.0.1:PORT, then prints `issuer <URL>` and flushes stdout. Everything the tests rely on is
idpyoidc's own: the token endpoint and its grant helpers (token exchange, client credentials,
authorization code), client authentication (client_secret_basic, client_secret_post, private_key_jwt),
JWT access tokens signed with the server's JWKS (served at /jwks.json), introspection and the RFC 8414
metadata. This file only carries HTTP to those endpoints and holds the configuration.

- Client `purra-gateway` (secret `gateway-secret`, or private_key_jwt with the EC P-256 key this script
  writes to GATEWAY_KEY_OUT as PKCS#8 PEM, kid `gw`) may use token exchange and client credentials.
- The exchange runs idpyoidc's default policy: any `audience` is accepted (the upstream's URL is known only
  when it starts), a `resource` is refused (`invalid_target`: none is configured), the scope is narrowed to
  what the subject token holds.
- Inbound tokens: idpyoidc needs a browser for the authorization code grant, so `POST /test/login` with
  `user=alice` (a test-only entry point) does what idpyoidc's own tests do without one: creates a session
  through its session manager for client `mcp-client`, mints an authorization code, and redeems it at the
  real token endpoint; the answer is that token endpoint's JSON (a JWT access token whose audience is
  `purra-gateway`, the gateway's).
- `POST /test/revoke` with `token=...` marks a token revoked in idpyoidc's session store.
- Audience: idpyoidc 5.0.0 validates the exchange's `audience`/`resource` (its default policy) but its
  exchange grant then drops them from the JWT (`ExchangeGrant.payload_arguments` uses the grant's own,
  empty, resources), and its client credentials grant ignores `resource`; the token class hook below
  puts the validated audience (or the client credentials request's `resource`) into `aud`.
- Client credentials: idpyoidc's own grant, with two faults of its 5.0.0 release worked around (the
  `token_type` it answers, and its failure on a client's second request): BearerClientCredentials below.
- private_key_jwt: idpyoidc accepts a client assertion whose `aud` is its token endpoint URL (a string).
- Actor tokens: idpyoidc's default exchange policy refuses `actor_token`. This configuration replaces the
  policy (idpyoidc's documented `policy.function` hook) with one that first verifies the actor token is an
  active access token this server issued, then runs idpyoidc's own default policy; and adds the RFC 8693
  `act` claim (`{"sub": <actor's sub or client_id>}`) through the token handler's custom claims hook.
  The exchange itself stays idpyoidc's `TokenExchangeHelper`.
- `sub` is the user id itself (`alice`), not idpyoidc's default salted hash, through `session_params.sub_func`.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptojwt.jwk.ec import ECKey
from cryptojwt.jwt import utc_time_sans_frac

from idpyoidc.message.oidc import AccessTokenRequest, AuthorizationRequest
from idpyoidc.server import Server
from idpyoidc.server.authn_event import create_authn_event
from idpyoidc.server.authz import AuthzHandling
from idpyoidc.server.client_authn import verify_client
from idpyoidc.server.configure import ASConfiguration
from idpyoidc.server.exception import ClientAuthenticationError, UnAuthorizedClient
from idpyoidc.server.oauth2.token_helper import validate_token_exchange_policy
from idpyoidc.server.oauth2.token_helper.client_credentials import ClientCredentials
from idpyoidc.server.token.jwt_token import JWTToken
from idpyoidc.server.user_info import UserInfo

USERS = ["alice", "bob", "carol"]
GATEWAY = "purra-gateway"
GATEWAY_SECRET = "gateway-secret"
LOGIN_CLIENT = "mcp-client"
LOGIN_SECRET = "mcp-client-secret"
LOGIN_REDIRECT = "http://127.0.0.1/callback"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"

# The actor of the exchange being handled (one request at a time: see LOCK).
CURRENT_ACT = {"act": None, "aud": None}
LOCK = threading.Lock()
SERVER = {}


def user_id_as_sub(uid, salt="", **kwargs):
    """`sub` is the user id (alice), not a salted hash."""
    return uid


def exchange_policy(request, context, subject_token, **kwargs):
    """idpyoidc's default exchange policy, after checking and recording the actor token."""
    CURRENT_ACT["act"] = None
    if "actor_token" in request:
        if request.get("actor_token_type") != "urn:ietf:params:oauth:token-type:access_token":
            from idpyoidc.message.oidc import TokenErrorResponse

            return TokenErrorResponse(error="invalid_request", error_description="Unsupported actor token type")
        try:
            info = context.session_manager.get_session_info_by_token(
                request["actor_token"], grant=True, handler_key="access_token"
            )
            token = context.session_manager.find_token(info["branch_id"], request["actor_token"])
            if not token.is_active():
                raise ValueError("inactive")
        except Exception:
            from idpyoidc.message.oidc import TokenErrorResponse

            return TokenErrorResponse(error="invalid_request", error_description="Actor token invalid")
        user = info.get("user_id") or ""
        actor = info["client_id"] if user in ("", "client_credentials") else user
        CURRENT_ACT["act"] = {"sub": actor}
        del request["actor_token"]
        del request["actor_token_type"]
    out = validate_token_exchange_policy(request, context, subject_token, **kwargs)
    if "error" not in out:
        aud = list(out.get("resource", [])) + list(out.get("audience", []))
        CURRENT_ACT["aud"] = aud or None
    return out


class BearerClientCredentials(ClientCredentials):
    """idpyoidc's client credentials grant with two faults of its 5.0.0 release worked around: it
    answers `token_type` with the token's class (`access_token`), which RFC 6749 section 7.1 tells a
    client not to use (answered `Bearer` here); and its second request for a client fails (it reads the
    stored client session as a dict: TypeError), so the stored one is dropped first and idpyoidc's own
    first-request path runs each time."""

    def process_request(self, req, **kwargs):
        mngr = self.endpoint.upstream_get("context").session_manager
        try:
            mngr.delete(["client_credentials", req["client_id"]])
        except (KeyError, ValueError):
            pass
        resp = ClientCredentials.process_request(self, req, **kwargs)
        if isinstance(resp, dict) and "access_token" in resp:
            resp["token_type"] = "Bearer"
        return resp


class ActJWTToken(JWTToken):
    """idpyoidc's JWT access token, plus the `act` claim of the exchange being handled."""

    def load_custom_claims(self, payload=None):
        payload = payload or {}
        if CURRENT_ACT["act"] is not None:
            payload["act"] = CURRENT_ACT["act"]
        if CURRENT_ACT["aud"] and not payload.get("aud"):
            payload["aud"] = CURRENT_ACT["aud"]
        return payload


def config(issuer, lifetime):
    return {
        "issuer": issuer,
        "httpc_params": {"verify": False, "timeout": 5},
        "keys": {
            "uri_path": "jwks.json",
            "key_defs": [{"type": "EC", "crv": "P-256", "use": ["sig"]}],
            "read_only": False,
        },
        "endpoint": {
            "metadata": {
                "path": ".well-known/oauth-authorization-server",
                "class": "idpyoidc.server.oauth2.server_metadata.ServerMetadata",
                "kwargs": {},
            },
            "authorization": {
                "path": "authorization",
                "class": "idpyoidc.server.oauth2.authorization.Authorization",
                "kwargs": {},
            },
            "token": {
                "path": "token",
                "class": "idpyoidc.server.oauth2.token.Token",
                "kwargs": {
                    "client_authn_method": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
                    "grant_types_helpers": {
                        "authorization_code": {
                            "class": "idpyoidc.server.oauth2.token_helper.access_token.AccessTokenHelper"
                        },
                        "client_credentials": {
                            "class": "__main__.BearerClientCredentials"
                        },
                        EXCHANGE: {
                            "class": "idpyoidc.server.oauth2.token_helper.token_exchange.TokenExchangeHelper",
                            "kwargs": {
                                "subject_token_types_supported": [
                                    "urn:ietf:params:oauth:token-type:access_token"
                                ],
                                "requested_token_types_supported": [
                                    "urn:ietf:params:oauth:token-type:access_token"
                                ],
                                "default_requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
                                "policy": {"": {"function": exchange_policy, "kwargs": {}}},
                            },
                        },
                    },
                },
            },
            "introspection": {
                "path": "introspection",
                "class": "idpyoidc.server.oauth2.introspection.Introspection",
                "kwargs": {"client_authn_method": ["client_secret_basic", "client_secret_post"]},
            },
        },
        "authentication": {
            "anon": {
                "acr": "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword",
                "class": "idpyoidc.server.user_authn.user.NoAuthn",
                "kwargs": {"user": "alice"},
            }
        },
        "userinfo": {"class": UserInfo, "kwargs": {"db": {u: {"sub": u} for u in USERS}}},
        "client_authn": verify_client,
        "authz": {
            "class": AuthzHandling,
            "kwargs": {
                "grant_config": {
                    "usage_rules": {
                        "authorization_code": {"supports_minting": ["access_token"], "max_usage": 1},
                        "access_token": {"supports_minting": ["access_token"], "expires_in": lifetime},
                    },
                    "expires_in": 43200,
                }
            },
        },
        "token_handler_args": {
            "code": {"lifetime": 600, "kwargs": {"crypt_conf": CRYPT}},
            "token": {
                "class": "__main__.ActJWTToken",
                "kwargs": {"lifetime": lifetime, "alg": "ES256"},
            },
            "refresh": {"lifetime": 3600, "kwargs": {"crypt_conf": CRYPT}},
        },
        "session_params": {
            "encrypter": CRYPT,
            "sub_func": {"public": {"function": user_id_as_sub}},
        },
    }


CRYPT = {
    "kwargs": {
        "keys": {
            "key_defs": [
                {"type": "OCT", "use": ["enc"], "kid": "password"},
                {"type": "OCT", "use": ["enc"], "kid": "salt"},
            ]
        },
        "iterations": 1,
    }
}


def setup(issuer, key_out, lifetime):
    server = Server(ASConfiguration(conf=config(issuer, lifetime), base_path="."), cwd=".")
    ctx = server.context
    ctx.map_supported_to_preferred()
    ctx.cdb[GATEWAY] = {
        "client_id": GATEWAY,
        "client_secret": GATEWAY_SECRET,
        "client_salt": "gw-salt",
        "redirect_uris": [(LOGIN_REDIRECT, None)],
        "grant_types_supported": ["client_credentials", EXCHANGE],
        "allowed_scopes": ["mcp:read", "mcp:write"],
        "response_types": ["code"],
        "token_usage_rules": {"access_token": {"expires_in": lifetime}},
    }
    ctx.cdb[LOGIN_CLIENT] = {
        "client_id": LOGIN_CLIENT,
        "client_secret": LOGIN_SECRET,
        "client_salt": "mc-salt",
        "redirect_uris": [(LOGIN_REDIRECT, None)],
        "grant_types_supported": ["authorization_code"],
        "allowed_scopes": ["mcp:read", "mcp:write"],
        "response_types": ["code"],
    }
    # The gateway's private_key_jwt key: written for the tests, its public half known to idpyoidc.
    priv = ec.generate_private_key(ec.SECP256R1())
    with open(key_out, "wb") as f:
        f.write(
            priv.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    jwk = ECKey(pub_key=priv.public_key(), kid="gw", use="sig")
    server.keyjar.import_jwks({"keys": [jwk.serialize()]}, GATEWAY)
    return server


def login(server, user, audience):
    """A session for `user` at client mcp-client, redeemed at the real token endpoint."""
    ctx = server.context
    mngr = ctx.session_manager
    areq = AuthorizationRequest(
        client_id=LOGIN_CLIENT,
        redirect_uri=LOGIN_REDIRECT,
        scope=["mcp:read", "mcp:write"],
        state="s",
        response_type="code",
        resource=[audience],
    )
    sid = mngr.create_session(create_authn_event(user), areq, user, client_id=LOGIN_CLIENT)
    grant = ctx.authz(sid, areq)
    grant.resources = [audience]
    code = grant.mint_token(
        session_id=sid,
        context=ctx,
        token_class="authorization_code",
        token_handler=mngr.token_handler["authorization_code"],
        usage_rules=grant.usage_rules.get("authorization_code", {}),
    )
    code.expires_at = utc_time_sans_frac() + 600
    treq = AccessTokenRequest(
        client_id=LOGIN_CLIENT,
        redirect_uri=LOGIN_REDIRECT,
        grant_type="authorization_code",
        client_secret=LOGIN_SECRET,
        code=code.value,
        state="s",
    )
    return call(server, "token", treq.to_urlencoded(), {})


def call(server, name, body, headers):
    endpoint = server.get_endpoint(name)
    http_info = {"headers": headers, "url": endpoint.full_path, "method": "POST"}
    # The endpoint's own parser expects JSON; a token request is a form (RFC 6749).
    form = {k: (v[0] if len(v) == 1 else v) for k, v in parse_qs(body).items()}
    try:
        req = endpoint.parse_request(form, http_info=http_info)
    except (ClientAuthenticationError, UnAuthorizedClient):
        return 401, json.dumps({"error": "invalid_client", "error_description": "client authentication failed"})
    if "error" in req:
        return 400, req.to_json()
    args = endpoint.process_request(req, http_info=http_info)
    if "error" in args:
        return 400, json.dumps({k: args[k] for k in ("error", "error_description") if k in args})
    if "response_args" in args and "error" in args["response_args"]:
        return 400, args["response_args"].to_json()
    out = endpoint.do_response(request=req, **args)
    return 200, out["response"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header("cache-control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        server = SERVER["s"]
        path = self.path.split("?")[0]
        with LOCK:
            if path == "/.well-known/oauth-authorization-server":
                meta = dict(server.context.provider_info)
                base = SERVER["issuer"]
                meta["token_endpoint"] = base + "/token"
                meta["introspection_endpoint"] = base + "/introspection"
                meta["jwks_uri"] = base + "/jwks.json"
                meta["issuer"] = base
                meta.pop("authorization_endpoint", None)
                meta["authorization_endpoint"] = base + "/authorization"
                return self.send(200, json.dumps(meta))
            if path == "/jwks.json":
                return self.send(200, json.dumps(server.keyjar.export_jwks(issuer_id="")))
        self.send(404, "{}")

    def do_POST(self):
        server = SERVER["s"]
        path = self.path.split("?")[0]
        n = int(self.headers.get("content-length") or 0)
        if n > 65536:
            return self.send(413, "{}")
        body = self.rfile.read(n).decode()
        headers = {k.lower(): v for k, v in self.headers.items()}
        with LOCK:
            CURRENT_ACT["act"] = None
            CURRENT_ACT["aud"] = None
            try:
                if path == "/test/login":
                    form = parse_qs(body)
                    user = form["user"][0]
                    audience = form.get("audience", [GATEWAY])[0]
                    if user not in USERS:
                        return self.send(400, '{"error":"unknown user"}')
                    status, out = login(server, user, audience)
                    return self.send(status, out)
                if path == "/test/revoke":
                    token = parse_qs(body)["token"][0]
                    mngr = server.context.session_manager
                    info = mngr.get_session_info_by_token(token, handler_key="access_token")
                    mngr.find_token(info["branch_id"], token).revoked = True
                    return self.send(200, "{}")
                if path == "/token":
                    form = parse_qs(body)
                    if form.get("grant_type") == ["client_credentials"]:
                        # The audience of a client credentials token: the `resource` asked for.
                        CURRENT_ACT["aud"] = form.get("resource") or None
                if path in ("/token", "/introspection"):
                    status, out = call(server, path[1:], body, headers)
                    return self.send(status, out)
            except Exception as e:  # noqa: BLE001 - a test peer: say what broke
                import traceback

                traceback.print_exc()
                return self.send(500, json.dumps({"error": "server_error", "error_description": type(e).__name__}))
            finally:
                CURRENT_ACT["act"] = None
                CURRENT_ACT["aud"] = None
        self.send(404, "{}")


def main():
    port = int(sys.argv[1])
    key_out = sys.argv[2]
    lifetime = 3600
    if len(sys.argv) > 4 and sys.argv[3] == "--lifetime":
        lifetime = int(sys.argv[4])
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    issuer = f"http://127.0.0.1:{httpd.server_address[1]}"
    SERVER["issuer"] = issuer
    SERVER["s"] = setup(issuer, key_out, lifetime)
    print(f"issuer {issuer}", flush=True)
    # Ends with the test binary that started it: when its stdin closes.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    httpd.serve_forever()


if __name__ == "__main__":
    main()
