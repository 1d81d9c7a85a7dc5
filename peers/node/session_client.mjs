// A client of a fleet of purra servers sharing one session store, on the official TypeScript MCP
// SDK 1.32.2: every HTTP request goes to the next server in turn (round robin, no stickiness, a
// server that refuses the connection is skipped, as a balancer's health check would), through the
// transport's `fetch` option.
//
// Usage: node session_client.mjs --servers URL,URL[,...] --calls N [--pause-after K]
// Calls the tool `echo {i}` N times in one session and checks each answer is `NAME:i`. With
// --pause-after K it prints {"event": "paused"} after K calls and waits for a line on stdin (the
// test kills a server meanwhile). Prints one line at the end:
// {"event": "done", "initializes": I, "sessions": [ids seen], "served": {NAME: count}, "failures": [...]}
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import readline from 'node:readline';

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const servers = (arg('--servers') ?? '').split(',').filter(Boolean).map((u) => new URL(u));
const calls = Number(arg('--calls') ?? '0');
const pauseAfter = arg('--pause-after') === undefined ? -1 : Number(arg('--pause-after'));
if (servers.length === 0 || !(calls > 0)) {
  process.stderr.write('usage: node session_client.mjs --servers URL,URL --calls N [--pause-after K]\n');
  process.exit(2);
}

let next = 0;
let initializes = 0;
const sessions = new Set();
const roundRobin = async (url, init) => {
  if (typeof init?.body === 'string' && init.body.includes('"method":"initialize"')) initializes++;
  const headers = new Headers(init?.headers);
  const sid = headers.get('mcp-session-id');
  if (sid) sessions.add(sid);
  let last;
  for (let tries = 0; tries < servers.length; tries++) {
    const target = servers[next++ % servers.length];
    const u = new URL(url);
    u.host = target.host;
    try {
      return await fetch(u, init);
    } catch (err) {
      last = err; // refused: the next server
    }
  }
  throw last;
};

const client = new Client({ name: 'session-client-node', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(servers[0], { fetch: roundRobin });
const served = {};
const failures = [];
const lines = readline.createInterface({ input: process.stdin });
const waitLine = () => new Promise((resolve) => lines.once('line', resolve));
try {
  await client.connect(transport);
  for (let i = 0; i < calls; i++) {
    if (i === pauseAfter) {
      process.stdout.write(`${JSON.stringify({ event: 'paused' })}\n`);
      await waitLine();
    }
    try {
      const r = await client.callTool({ name: 'echo', arguments: { i } });
      const text = r.content?.[0]?.text ?? '';
      const [name, n] = text.split(':');
      if (Number(n) !== i || r.isError) failures.push({ i, text });
      served[name] = (served[name] ?? 0) + 1;
    } catch (err) {
      failures.push({ i, error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
    }
  }
  await transport.terminateSession?.().catch((err) => failures.push({ terminate: `${err}` }));
  await client.close();
} catch (err) {
  failures.push({ failed: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
}
process.stdout.write(
  `${JSON.stringify({ event: 'done', initializes, sessions: [...sessions], served, failures })}\n`,
);
process.exit(0);
