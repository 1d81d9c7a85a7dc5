// A client whose call outlives the server it started on, on the official TypeScript MCP SDK
// 1.32.2: it calls one tool with `onprogress` through a load balancer and lets the SDK resume the
// call's stream (GET with `Last-Event-ID`) wherever the balancer sends it when the stream breaks.
//
// Usage: node resume_client.mjs --url URL --tool NAME --args JSON
//          [--drop-after K --gap-ms G --instances NAME=URL,NAME=URL,...]
// With --drop-after, the client itself breaks the call's POST stream after its K-th progress
// notification (the server goes on), waits G ms, and sends the SDK's resuming GET
// (`Last-Event-ID`) straight to the first of --instances other than the one that answered the
// call (named by the balancer's X-Purra-Instance): what the server sent meanwhile must arrive
// after it.
// Prints one JSON line per event, in order:
//   {"event": "ready", "session": ID}                       connected (one initialize)
//   {"event": "http", "method": M, "status": S, "instance": I, "host": H, "last_event_id": L,
//    "call": B}  each HTTP answer (I: the balancer's X-Purra-Instance header, null from a server
//       reached directly; H: host:port asked; B: true for the tools/call)
//   {"event": "progress", "progress": P, "total": T, "message": TEXT}
//   {"event": "dropped", "after": K}                      the client broke the stream
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
const dropAfter = arg('--drop-after') === undefined ? -1 : Number(arg('--drop-after'));
const gapMs = Number(arg('--gap-ms') ?? '0');
const instances = (arg('--instances') ?? '')
  .split(',')
  .filter(Boolean)
  .map((pair) => pair.split('='));
let holder;
let dropped = false;
let resumed = false;

// The call's SSE body, broken by the client after its `dropAfter`-th progress notification.
function breaking(response) {
  const reader = response.body.getReader();
  const text = new TextDecoder();
  let seen = 0;
  const body = new ReadableStream({
    async pull(controller) {
      // Broken once the SDK has read the K-th notification (a chunk still queued would be lost).
      if (seen >= dropAfter) {
        dropped = true;
        say({ event: 'dropped', after: seen });
        controller.error(new Error('the client broke the stream'));
        reader.cancel().catch(() => {});
        return;
      }
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      controller.enqueue(value);
      seen += text.decode(value, { stream: true }).split('notifications/progress').length - 1;
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

let initializes = 0;
const watching = async (u, init) => {
  const body = typeof init?.body === 'string' ? init.body : '';
  if (body.includes('"method":"initialize"')) initializes++;
  const headers = new Headers(init?.headers);
  const isCall = body.includes('"method":"tools/call"');
  let target = u;
  if (dropped && !resumed && headers.get('last-event-id')) {
    resumed = true;
    await new Promise((r) => setTimeout(r, gapMs));
    const other = instances.find(([name]) => name !== holder);
    if (other) {
      target = new URL(u);
      target.host = new URL(other[1]).host;
    }
  }
  const response = await fetch(target, init);
  say({
    event: 'http',
    method: init?.method ?? 'GET',
    status: response.status,
    instance: response.headers.get('x-purra-instance'),
    host: new URL(target).host,
    last_event_id: headers.get('last-event-id'),
    call: isCall,
  });
  if (isCall) holder = response.headers.get('x-purra-instance');
  const sse = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  return isCall && dropAfter > 0 && sse && response.body ? breaking(response) : response;
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
