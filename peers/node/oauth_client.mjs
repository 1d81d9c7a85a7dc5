// The official TypeScript SDK's client with its OAuth support, against a guarded MCP server
// (crates/purra-protocol/tests/it/auth_oidc.rs): node oauth_client.mjs URL USER.
// The SDK discovers the authorization server from the server's 401, sends the user to the
// authorization URL (peers/oidc/browser.mjs plays the user at oidc-provider's login and consent
// forms, peers/oidc/server.mjs), exchanges the code (PKCE, resource indicator) as the pre-registered
// public client purra-ts, connects again and calls `whoami`. Prints one JSON line:
// {"whoami": <the tool's answer>, "scope": <the token's scope>}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { authorize } from '../oidc/browser.mjs';

const [url, user] = process.argv.slice(2);
const redirect = 'http://127.0.0.1/callback';

let tokens;
let verifier;
let authorizationUrl;
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return {
      client_name: 'purra-ts-peer',
      redirect_uris: [redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  clientInformation() { return { client_id: 'purra-ts' }; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  redirectToAuthorization(u) { authorizationUrl = u; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
};

const client = new Client({ name: 'purra-ts-oauth', version: '1.0.0' });
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await client.connect(transport);
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  const back = new URL(await authorize(authorizationUrl, user, redirect));
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code in the redirect: ${back.search}`);
  await transport.finishAuth(code);
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
}
const result = await client.callTool({ name: 'whoami', arguments: {} });
process.stdout.write(`${JSON.stringify({ whoami: JSON.parse(result.content[0].text), scope: tokens.scope })}\n`);
await client.close();
