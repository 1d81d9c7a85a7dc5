// The official TypeScript SDK's client with its OAuth support, against a guarded MCP server
// (crates/purra-protocol/tests/auth_oidc.rs): node oauth_client.mjs URL USER.
// The SDK discovers the authorization server from the server's 401, sends the user to the
// authorization URL (this script plays the user at oidc-provider's login and consent forms,
// peers/oidc/server.mjs), exchanges the code (PKCE, resource indicator) as the pre-registered
// public client purra-ts, connects again and calls `whoami`. Prints one JSON line:
// {"whoami": <the tool's answer>, "scope": <the token's scope>}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

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

// The user's browser: redirects followed by hand, cookies kept by name.
const jar = new Map();
async function visit(target, init = {}) {
  const headers = { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') };
  const res = await fetch(target, { ...init, headers: { ...headers, ...init.headers }, redirect: 'manual' });
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const i = pair.indexOf('=');
    jar.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return res;
}

async function authorize(start) {
  let at = new URL(start);
  let res = await visit(at);
  for (let step = 0; step < 20; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      at = new URL(res.headers.get('location'), at);
      if (at.href.startsWith(redirect)) {
        const code = at.searchParams.get('code');
        if (!code) throw new Error(`no code in the redirect: ${at.search}`);
        return code;
      }
      res = await visit(at);
      continue;
    }
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${at}: ${res.status} ${body}`);
    let form;
    if (body.includes('name="prompt" value="login"')) form = { prompt: 'login', login: user, password: 'x' };
    else if (body.includes('name="prompt" value="consent"')) form = { prompt: 'consent' };
    else throw new Error(`${at} shows neither the login nor the consent form`);
    res = await visit(at, {
      method: 'POST',
      body: new URLSearchParams(form).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  }
  throw new Error('the authorization did not end within 20 steps');
}

const client = new Client({ name: 'purra-ts-oauth', version: '1.0.0' });
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await client.connect(transport);
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  const code = await authorize(authorizationUrl);
  await transport.finishAuth(code);
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await client.connect(transport);
}
const result = await client.callTool({ name: 'whoami', arguments: {} });
process.stdout.write(`${JSON.stringify({ whoami: JSON.parse(result.content[0].text), scope: tokens.scope })}\n`);
await client.close();
