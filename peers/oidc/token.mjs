// Gets an access token for one user from the authorization server of peers/oidc/server.mjs the
// way a native client does: the authorization code flow with PKCE (S256) as the public client
// purra-public, the user's part played by browser.mjs at the server's login and consent forms,
// the code exchanged at the token endpoint with the resource indicator (RFC 8707), so the token's
// audience is RESOURCE.
// As a program: node token.mjs ISSUER USER RESOURCE [SCOPE] prints the access token on stdout
// (SCOPE defaults to "mcp:read mcp:write").
import crypto from 'node:crypto';
import { authorize } from './browser.mjs';

const REDIRECT = 'http://127.0.0.1/callback';
const CLIENT = 'purra-public';

const b64url = (buf) => buf.toString('base64url');

export async function accessToken(issuer, user, resource, scope = 'mcp:read mcp:write') {
  const meta = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
  const verifier = b64url(crypto.randomBytes(32));
  const challenge = b64url(crypto.createHash('sha256').update(verifier).digest());
  const state = b64url(crypto.randomBytes(16));
  const start = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: CLIENT, redirect_uri: REDIRECT, scope, state, resource,
    code_challenge: challenge, code_challenge_method: 'S256',
  })) start.searchParams.set(k, v);
  const back = new URL(await authorize(start.href, user, REDIRECT));
  if (back.searchParams.get('state') !== state) throw new Error(`state mismatch in ${back}`);
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code in ${back}`);
  const res = await fetch(meta.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: CLIENT,
      code_verifier: verifier, resource,
    }).toString(),
  });
  const body = await res.json();
  if (res.status !== 200 || !body.access_token) {
    throw new Error(`the token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  }
  return body.access_token;
}

const [issuer, user, resource, scope] = process.argv.slice(2);
if (!issuer || !user || !resource) {
  process.stderr.write('usage: node token.mjs ISSUER USER RESOURCE [SCOPE]\n');
  process.exit(2);
}
process.stdout.write(`${await accessToken(issuer, user, resource, scope)}\n`);
