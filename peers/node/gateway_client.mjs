// Downstream client for purra gateway's end-to-end tests, on the official TypeScript MCP SDK 1.32.2.
//
// Usage: node gateway_client.mjs [--elicit approve|deny] [--bearer-env VAR] --steps JSON (-- <server command> [args...] | --http URL)
//
// Steps (a JSON array, run in order):
//   {"list": true}                  prints {"step": "list", "tools": [Tool, ...]}
//   {"call": NAME, "args": {...}}   prints {"step": "call", "tool": NAME, "result": CallToolResult}
//                                   or {"step": "call", "tool": NAME, "error": TEXT}
// Events printed as they happen: {"event": "list_changed"}, {"event": "progress", "message": ...},
// {"event": "elicit", "message": TEXT, "answer": "approve"|"deny"}. With --elicit the client declares
// the elicitation capability and its handler answers every form with that decision. With --bearer-env
// (HTTP only) every request carries `Authorization: Bearer <the value of VAR>`.
// Ends with {"event": "done"}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const CALL_TIMEOUT = 90000;

function emit(doc) {
  const sorted = (v) =>
    Array.isArray(v)
      ? v.map(sorted)
      : v && typeof v === 'object'
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]))
        : v;
  process.stdout.write(`${JSON.stringify(sorted(doc))}\n`);
}

function parseArgs(argv) {
  const usage = 'usage: gateway_client.mjs [--elicit approve|deny] [--bearer-env VAR] --steps JSON (-- <server command> [args...] | --http URL)';
  const cut = argv.indexOf('--');
  const command = cut >= 0 ? argv.slice(cut + 1) : [];
  const own = cut >= 0 ? argv.slice(0, cut) : argv;
  const opts = { http: undefined, elicit: undefined, bearerEnv: undefined, steps: undefined, command };
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--http' && i + 1 < own.length) opts.http = own[++i];
    else if (own[i] === '--elicit' && i + 1 < own.length) opts.elicit = own[++i];
    else if (own[i] === '--bearer-env' && i + 1 < own.length) opts.bearerEnv = own[++i];
    else if (own[i] === '--steps' && i + 1 < own.length) opts.steps = JSON.parse(own[++i]);
    else {
      process.stderr.write(`${usage}\n`);
      process.exit(2);
    }
  }
  if (Boolean(opts.http) === command.length > 0 || !opts.steps) {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const capabilities = opts.elicit ? { elicitation: { form: {} } } : {};
const client = new Client({ name: 'gateway-client-node', version: '1.0.0' }, { capabilities });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => emit({ event: 'list_changed' }));
if (opts.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    emit({ event: 'elicit', message: request.params.message, answer: opts.elicit });
    return { action: 'accept', content: { decision: opts.elicit, note: 'from the node client' } };
  });
}
const requestInit = opts.bearerEnv
  ? { headers: { Authorization: `Bearer ${process.env[opts.bearerEnv] ?? ''}` } }
  : undefined;
const transport = opts.http
  ? new StreamableHTTPClientTransport(new URL(opts.http), { requestInit })
  : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: { ...process.env }, stderr: 'inherit' });
try {
  await client.connect(transport);
  for (const step of opts.steps) {
    if (step.list) {
      const res = await client.listTools();
      emit({ step: 'list', tools: res.tools });
      continue;
    }
    try {
      const result = await client.callTool({ name: step.call, arguments: step.args ?? {} }, undefined, {
        timeout: CALL_TIMEOUT,
        resetTimeoutOnProgress: true,
        onprogress: (p) => emit({ event: 'progress', message: p.message }),
      });
      emit({ step: 'call', tool: step.call, result });
    } catch (err) {
      emit({ step: 'call', tool: step.call, error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
      break;
    }
  }
  if (opts.http) await transport.terminateSession?.().catch(() => {});
  await client.close();
} catch (err) {
  emit({ event: 'failed', error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
}
emit({ event: 'done' });
process.exit(0);
