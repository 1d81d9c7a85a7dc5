// A real OAuth 2.1 authorization server for purra's authorization tests: oidc-provider with
// resource indicators (RFC 8707) and JWT access tokens (RFC 9068) signed with ES256, PKCE, the
// client credentials grant, introspection, revocation and dynamic registration, and its development
// login and consent forms (the tests submit them over HTTP).
//
// Listens on 127.0.0.1 on a free port and prints one JSON line: {"issuer": "http://127.0.0.1:PORT"}.
// Clients:
//   purra-public   public (none), authorization code + refresh, redirect http://127.0.0.1/callback;
//                  its access tokens live PURRA_OIDC_PUBLIC_TTL seconds (default 3600)
//   purra-ts       the same, for the TypeScript SDK client
//   purra-service  confidential (client_secret_basic, secret "service-secret"), client credentials
//   purra-other    the same as purra-service (another principal)
//   purra-short    the same as purra-service, its access tokens live 1 second
//   purra-page     the approver page's OpenID Connect sign-in: confidential (client_secret_basic,
//                  secret "page-secret"), authorization code, redirect
//                  http://127.0.0.1/login/callback (native: any loopback port)
//   dynamically registered clients: access tokens live PURRA_OIDC_OTHER_TTL seconds (default 3600);
//   public ones (auth method none) get a new refresh token at each refresh (rotation: one used
//   twice revokes the grant). Revocation (RFC 7009) at /token/revocation.
// Every account SUB has the claims email SUB@example.com (verified), name "SUB (test)" and
// groups ["approvers", "sre"] for alice, ["sre"] for bob, ["leads"] for lena, else [] (scopes
// email, profile, groups); ID tokens carry
// the claims their scopes ask for.
// Every resource indicator is accepted; the audience is the indicator, scopes mcp:read mcp:write.
import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const publicTtl = Number(process.env.PURRA_OIDC_PUBLIC_TTL || 3600);
const otherTtl = Number(process.env.PURRA_OIDC_OTHER_TTL || 3600);

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
// PURRA_OIDC_HOST names it another loopback way (`localhost`: another site than 127.0.0.1 for
// a browser, whose SameSite cookies then stay behind on the way back).
const issuer = `http://${process.env.PURRA_OIDC_HOST || '127.0.0.1'}:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'es256-1', alg: 'ES256', use: 'sig' };

const publicClient = (clientId) => ({
  client_id: clientId,
  token_endpoint_auth_method: 'none',
  application_type: 'native',
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  redirect_uris: ['http://127.0.0.1/callback'],
});
const serviceClient = (clientId) => ({
  client_id: clientId,
  client_secret: 'service-secret',
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
});

const pageClient = {
  client_id: 'purra-page',
  client_secret: 'page-secret',
  token_endpoint_auth_method: 'client_secret_basic',
  application_type: 'native',
  grant_types: ['authorization_code'],
  response_types: ['code'],
  redirect_uris: ['http://127.0.0.1/login/callback'],
};

const provider = new Provider(issuer, {
  clients: [publicClient('purra-public'), publicClient('purra-ts'),
    serviceClient('purra-service'), serviceClient('purra-other'), serviceClient('purra-short'),
    pageClient],
  jwks: { keys: [signing] },
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'mcp:read', 'mcp:write'],
  claims: {
    openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'],
  },
  conformIdTokenClaims: false,
  findAccount: (_ctx, sub) => ({
    accountId: sub,
    claims: () => ({
      sub,
      email: `${sub}@example.com`,
      email_verified: true,
      name: `${sub} (test)`,
      groups: { alice: ['approvers', 'sre'], bob: ['sre'], lena: ['leads'] }[sub] ?? [],
    }),
  }),
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource, client) => ({
        scope: 'mcp:read mcp:write',
        audience: resource,
        accessTokenFormat: 'jwt',
        accessTokenTTL: {
          'purra-short': 1, 'purra-public': publicTtl, 'purra-ts': publicTtl,
        }[client.clientId] ?? otherTtl,
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
});
provider.on('server_error', (_ctx, err) => console.error('oidc server_error', err));
server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
