// Plays the user's browser at oidc-provider's development login and consent forms
// (peers/oidc/server.mjs): follows the authorization URL's redirects with the cookies set on
// the way, signs in as USER, accepts the consent, and stops at the redirect to the client
// (any URL starting with REDIRECT_PREFIX), which it does not follow.
// As a module: authorize(url, user, redirectPrefix) resolves to that redirect URL.
// As a program: node browser.mjs URL USER REDIRECT_PREFIX prints it on stdout.
import { pathToFileURL } from 'node:url';

export async function authorize(start, user, redirectPrefix) {
  const jar = new Map();
  const visit = async (target, init = {}) => {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(target, { ...init, headers: { cookie, ...init.headers }, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return res;
  };
  let at = new URL(start);
  let res = await visit(at);
  for (let step = 0; step < 20; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      at = new URL(res.headers.get('location'), at);
      if (at.href.startsWith(redirectPrefix)) return at.href;
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

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [url, user, prefix] = process.argv.slice(2);
  process.stdout.write(`${await authorize(url, user, prefix)}\n`);
}
