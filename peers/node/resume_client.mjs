// A client whose call outlives the server it started on, on the official TypeScript MCP SDK
// 1.32.2: it calls one tool with `onprogress` through a load balancer and lets the SDK resume the
// call's stream (GET with `Last-Event-ID`) wherever the balancer sends it when the stream breaks.
//
// Usage: node resume_client.mjs --url URL --tool NAME --args JSON
// Prints one JSON line per event, in order:
//   {"event": "ready", "session": ID}                       connected (one initialize)
//   {"event": "http", "method": M, "status": S, "instance": I, "last_event_id": L, "call": B}
//       each HTTP answer (I: the balancer's X-Purra-Instance header; B: true for the tools/call)
//   {"event": "progress", "progress": P, "total": T, "message": TEXT}
//   {"event": "result", "result": R, "initializes": N}     the call's answer, then it exits
//   {"event": "failed", "error": TEXT, "initializes": N}
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const url = arg('--url');
const tool = arg('--tool');
const args = JSON.parse(arg('--args') ?? '{}');
if (!url || !tool) {
  process.stderr.write('usage: node resume_client.mjs --url URL --tool NAME --args JSON\n');
  process.exit(2);
}
const say = (v) => process.stdout.write(`${JSON.stringify(v)}\n`);

let initializes = 0;
const watching = async (u, init) => {
  const body = typeof init?.body === 'string' ? init.body : '';
  if (body.includes('"method":"initialize"')) initializes++;
  const headers = new Headers(init?.headers);
  const response = await fetch(u, init);
  say({
    event: 'http',
    method: init?.method ?? 'GET',
    status: response.status,
    instance: response.headers.get('x-purra-instance'),
    last_event_id: headers.get('last-event-id'),
    call: body.includes('"method":"tools/call"'),
  });
  return response;
};

const client = new Client({ name: 'resume-client-node', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  fetch: watching,
  // A resumed stream may land on a server that is still going away: try a few times.
  reconnectionOptions: {
    initialReconnectionDelay: 200,
    maxReconnectionDelay: 1000,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 20,
  },
});
try {
  await client.connect(transport);
  say({ event: 'ready', session: transport.sessionId });
  const result = await client.callTool({ name: tool, arguments: args }, undefined, {
    onprogress: (p) => say({ event: 'progress', ...p }),
    timeout: 120000,
    resetTimeoutOnProgress: true,
  });
  say({ event: 'result', result, initializes });
  await client.close();
} catch (err) {
  say({ event: 'failed', error: `${err?.name ?? 'Error'}: ${err?.message ?? err}`, initializes });
}
process.exit(0);
