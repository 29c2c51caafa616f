// A real OAuth 2.0 authorization server for the backend-credential tests: npm oidc-provider on
// loopback. Configured by environment variables (set by tests/authz/fixture.py):
//   PORT                 port to listen on (127.0.0.1)
//   CLIENT_ID, CLIENT_SECRET   the gateway's confidential client
//   RESOURCE             the backend's URL: the only resource indicator served (audience-bound JWTs)
//   TOKEN_TTL            seconds an issued access token lives
//   SUBJECT_PUBLIC_KEY   PEM key that signs the client tokens token exchange accepts
//   SUBJECT_ISSUER, SUBJECT_AUDIENCE   what a subject token must say
// client_credentials and resourceIndicators are built in; RFC 8693 token exchange is added with
// the documented registerGrantType hook. Every issued token is counted at GET /stats.
import { createRequire } from 'node:module';
import { generateKeyPairSync, createPublicKey } from 'node:crypto';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url); // honours NODE_PATH (ESM imports do not)
const { default: Provider, errors } = await import(pathToFileURL(require.resolve('oidc-provider')).href);
const jose = await import(pathToFileURL(require.resolve('jose')).href);

const env = process.env;
const port = Number(env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const ttl = Number(env.TOKEN_TTL || '300');
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const stats = { client_credentials: 0, token_exchange: 0, refused: 0 };

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'authz-1', use: 'sig', alg: 'RS256' };
const subjectKey = createPublicKey(env.SUBJECT_PUBLIC_KEY);

function resourceServer(resource) {
  if (resource !== env.RESOURCE) throw new errors.InvalidTarget('unknown resource');
  return { scope: 'mcp', audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
}

const provider = new Provider(issuer, {
  clients: [{
    client_id: env.CLIENT_ID,
    client_secret: env.CLIENT_SECRET,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [signingKey] },
  scopes: ['mcp'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => env.RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => resourceServer(resource),
    },
  },
  ttl: { ClientCredentials: () => ttl },
  // oidc-provider fixes `sub` of a client's own token to its client_id: the exchanged subject rides beside it.
  extraTokenClaims: (ctx) => (ctx.exchangedSubject ? { exchanged_sub: ctx.exchangedSubject, act: { sub: env.CLIENT_ID } } : undefined),
});

// RFC 8693: a client token (signed by SUBJECT_PUBLIC_KEY) in, an audience-bound JWT for RESOURCE out.
async function tokenExchange(ctx) {
  const { subject_token: subjectToken, subject_token_type: subjectType, resource } = ctx.oidc.params;
  if (subjectType !== ACCESS_TOKEN_TYPE || !subjectToken) {
    throw new errors.InvalidRequest('subject_token of type access_token required');
  }
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subjectToken, subjectKey, {
      issuer: env.SUBJECT_ISSUER, audience: env.SUBJECT_AUDIENCE,
    }));
  } catch (err) {
    throw new errors.InvalidGrant(`subject_token refused: ${err.code || 'invalid'}`);
  }
  const target = resource || env.RESOURCE;
  const token = new provider.ClientCredentials({ client: ctx.oidc.client, scope: 'mcp' });
  token.resourceServer = new provider.ResourceServer(target, resourceServer(target));
  ctx.exchangedSubject = claims.sub;
  ctx.oidc.entity('ClientCredentials', token);
  const value = await token.save();
  stats.token_exchange += 1;
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
  };
}
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange,
  ['subject_token', 'subject_token_type', 'resource', 'audience', 'scope', 'requested_token_type'], ['resource']);

provider.on('grant.success', (ctx) => {
  if (ctx.oidc.params.grant_type === 'client_credentials') stats.client_credentials += 1;
});
provider.on('grant.error', () => { stats.refused += 1; });

// The client may use the token-exchange grant once it is registered.
const { Client } = provider;
const client = await Client.find(env.CLIENT_ID);
client.grantTypes = [...client.grantTypes, TOKEN_EXCHANGE];

provider.use(async (ctx, next) => {
  if (ctx.path === '/stats') { ctx.body = stats; return; }
  await next();
});
provider.listen(port, '127.0.0.1');
