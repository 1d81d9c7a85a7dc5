// Interop fixture client (peers/FIXTURES.md) built on the official TypeScript MCP SDK 1.32.2 (Client + StdioClientTransport).
//
// Usage: node client.mjs [--protocol-version V]... -- <server command> [args...]
//        node client.mjs [--protocol-version V]... --http URL
//        node client.mjs [--protocol-version V]... --sse URL   (HTTP+SSE of 2024-11-05)
//
// With no --protocol-version the checks run for 2025-11-25, then 2025-06-18. Over stdio each run
// spawns a fresh server process. Prints `ok <check>` per check, `FAIL <check>: <why>` (exit 1) on
// the first failure, and `fixture-client: N passed, 0 failed` at the end.
//
// FIXTURE_SERVER_IS_PURRA=1 makes the checks where FIXTURES.md lets SDK peers differ strict:
// logging must deliver exactly `warning message` and `error message`, and invalid arguments must
// come back as a result with isError (not a JSON-RPC error).
import { z } from 'zod';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const DEFAULT_VERSIONS = ['2025-11-25', '2025-06-18'];
const WAIT = 5000; // ms for any single request or awaited notification
const RUN_TIMEOUT = 30000; // ms for one whole run of the 20 checks
const STRICT = process.env.FIXTURE_SERVER_IS_PURRA === '1';
const ALL_TOOLS = ['echo', 'add', 'fail', 'progress', 'block', 'cancellations', 'log', 'sample', 'elicit', 'roots', 'add_tool', 'touch'];
const REQ = { timeout: WAIT };

class CheckFailed extends Error {}

function expect(cond, why) {
  if (!cond) throw new CheckFailed(why);
}

const show = (v) => JSON.stringify(v);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const texts = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);

function onlyText(res) {
  const t = texts(res);
  expect(res.content?.length === 1 && t.length === 1, `expected one text block, got ${show(res.content)}`);
  return t[0];
}

async function waitFor(pred, what, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  while (!pred()) {
    if (Date.now() > deadline) throw new CheckFailed(`${what} did not arrive within ${timeout / 1000} s`);
    await sleep(10);
  }
}

/**
 * Client.connect() always offers LATEST_PROTOCOL_VERSION in initialize and has no option for it.
 * This wrapper is a Transport (the SDK's public interface) around the real one: it rewrites the
 * protocolVersion of the outgoing initialize request, and records the negotiated version through
 * the optional Transport.setProtocolVersion hook, which Client.connect() calls after the
 * handshake (forwarded so the HTTP transport still sets its MCP-Protocol-Version header).
 */
class VersionPinningTransport {
  constructor(inner, version) {
    this.inner = inner;
    this.version = version;
    this.negotiated = undefined;
    inner.onmessage = (message, extra) => this.onmessage?.(message, extra);
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }
  get sessionId() {
    return this.inner.sessionId;
  }
  start() {
    return this.inner.start();
  }
  send(message, options) {
    if (message.method === 'initialize') {
      message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return this.inner.send(message, options);
  }
  close() {
    return this.inner.close();
  }
  setProtocolVersion(version) {
    this.negotiated = version;
    this.inner.setProtocolVersion?.(version);
  }
}

function makeClient(inbox) {
  const client = new Client(
    { name: 'fixture-client-node', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  // ---- client handlers (FIXTURES.md "Client handlers") ----
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    const last = request.params.messages.at(-1)?.content;
    const blocks = Array.isArray(last) ? last : [last];
    const lastText = blocks.filter((b) => b?.type === 'text').map((b) => b.text).join('');
    return { role: 'assistant', content: { type: 'text', text: `echo:${lastText}` }, model: 'fixture-model', stopReason: 'endTurn' };
  });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'purra' } }));
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///tmp/fixture-root', name: 'fixture' }] }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void inbox.logs.push(n.params));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void inbox.notes.push(n));
  client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void inbox.notes.push(n));
  return client;
}

async function allTools(client) {
  const tools = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const page = await client.listTools(cursor ? { cursor } : undefined, REQ);
    tools.push(...page.tools);
    cursor = page.nextCursor;
    if (!cursor) return tools;
  }
  throw new CheckFailed('tools/list did not end after 100 pages');
}

function checks(ctx) {
  const { client, inbox, transport, version, index, freshServer } = ctx;
  const call = (name, args = {}, options = {}) => client.callTool({ name, arguments: args }, undefined, { ...REQ, ...options });
  const readText = async (uri) => {
    const res = await client.readResource({ uri }, REQ);
    expect(res.contents.length === 1, `${uri}: ${res.contents.length} contents`);
    expect(typeof res.contents[0].text === 'string', `${uri}: not text contents`);
    return res.contents[0].text;
  };
  const counter = async () => Number(onlyText(await call('cancellations')));

  return [
    ['initialize', async () => {
      await client.connect(transport, REQ);
      const info = client.getServerVersion();
      const caps = client.getServerCapabilities() ?? {};
      expect(info?.name?.startsWith('fixture-'), `server name ${show(info?.name)}`);
      expect(caps.tools, 'no tools capability');
      expect(caps.resources?.subscribe === true, 'no resources.subscribe capability');
      expect(caps.prompts, 'no prompts capability');
      expect(caps.logging, 'no logging capability');
      expect(caps.completions, 'no completions capability');
      expect(transport.negotiated === version, `negotiated ${transport.negotiated}, asked ${version}`);
    }],
    ['ping', async () => {
      const raw = await client.request({ method: 'ping' }, z.looseObject({}), REQ);
      expect(show(raw) === '{}', `ping returned ${show(raw)}`);
    }],
    ['tools-list', async () => {
      const tools = await allTools(client);
      const names = new Set(tools.map((t) => t.name));
      const missing = ALL_TOOLS.filter((n) => !names.has(n));
      expect(missing.length === 0, `missing tools ${show(missing)}`);
      const schema = tools.find((t) => t.name === 'add').outputSchema ?? {};
      expect(schema.type === 'object', `add outputSchema ${show(schema)}`);
      expect(schema.properties?.sum?.type === 'number', `add outputSchema ${show(schema)}`);
      expect(show(schema.required) === '["sum"]', `add outputSchema required ${show(schema.required)}`);
    }],
    ['echo', async () => {
      const res = await call('echo', { text: 'hello' });
      expect(!res.isError, 'echo returned isError');
      expect(onlyText(res) === 'hello', `echo gave ${show(texts(res))}`);
    }],
    ['structured', async () => {
      const res = await call('add', { a: 2, b: 3 });
      expect(!res.isError, 'add returned isError');
      expect(show(res.structuredContent) === '{"sum":5}', `structuredContent ${show(res.structuredContent)}`);
      expect(texts(res).length >= 1, 'add has no text block');
    }],
    ['is-error', async () => {
      const res = await call('fail');
      expect(res.isError === true, 'fail did not set isError');
      expect(onlyText(res) === 'fixture failure', `fail gave ${show(texts(res))}`);
    }],
    ['invalid-arguments', async () => {
      let res;
      try {
        res = await call('echo', {});
      } catch (err) {
        if (!(err instanceof McpError)) throw err;
        expect(!STRICT, `purra must answer with an isError result, got JSON-RPC error ${err.code}`);
        return;
      }
      expect(res.isError === true, `echo {} succeeded: ${show(texts(res))}`);
    }],
    ['resources-pages', async () => {
      let pages = 0;
      let cursor;
      const uris = [];
      do {
        const page = await client.listResources(cursor ? { cursor } : undefined, REQ);
        pages += 1;
        uris.push(...page.resources.map((r) => r.uri));
        cursor = page.nextCursor;
      } while (cursor && pages <= 50);
      const want = [1, 2, 3, 4, 5].map((n) => `fixture://static/${n}`).concat('fixture://watched');
      expect(pages >= 3, `only ${pages} page(s)`);
      expect(show([...uris].sort()) === show([...want].sort()), `resources ${show(uris)}`);
    }],
    ['resource-read', async () => {
      const got = await readText('fixture://static/3');
      expect(got === 'static 3', `read gave ${show(got)}`);
    }],
    ['templates', async () => {
      const res = await client.listResourceTemplates(undefined, REQ);
      const found = res.resourceTemplates.map((t) => t.uriTemplate);
      expect(found.includes('fixture://items/{id}'), `templates ${show(found)}`);
      const got = await readText('fixture://items/42');
      expect(got === 'item 42', `read gave ${show(got)}`);
    }],
    ['subscribe', async () => {
      const uri = 'fixture://watched';
      await client.subscribeResource({ uri }, REQ);
      const start = inbox.notes.length;
      const res = await call('touch', { uri });
      expect(onlyText(res) === `touched ${uri}`, `touch gave ${show(texts(res))}`);
      await waitFor(
        () => inbox.notes.slice(start).some((n) => n.method === 'notifications/resources/updated' && n.params.uri === uri),
        `notifications/resources/updated for ${uri}`,
      );
      await client.unsubscribeResource({ uri }, REQ);
    }],
    ['prompt', async () => {
      for (const [args, want] of [[{ name: 'Ada' }, 'Hello, Ada!'], [{ name: 'Ada', style: 'loud' }, 'HELLO, ADA!']]) {
        const res = await client.getPrompt({ name: 'greet', arguments: args }, REQ);
        expect(res.messages.length === 1, `greet ${show(args)}: ${res.messages.length} messages`);
        const [msg] = res.messages;
        expect(msg.role === 'user', `greet ${show(args)}: role ${msg.role}`);
        expect(msg.content.type === 'text' && msg.content.text === want, `greet ${show(args)}: ${show(msg.content)}`);
      }
    }],
    ['completion', async () => {
      const res = await client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'name', value: 'al' } }, REQ);
      expect(show(res.completion.values) === '["alice","alan"]', `completion ${show(res.completion.values)}`);
    }],
    ['logging', async () => {
      await client.setLoggingLevel('warning', REQ);
      const start = inbox.logs.length;
      const res = await call('log');
      expect(onlyText(res) === 'logged', `log gave ${show(texts(res))}`);
      const wanted = ['warning message', 'error message'];
      const got = () => inbox.logs.slice(start).map((m) => m.data);
      await waitFor(() => wanted.every((w) => got().includes(w)), 'warning and error log messages');
      await sleep(100); // let any stragglers in before the exact comparison
      for (const m of inbox.logs.slice(start)) {
        expect(m.logger === 'fixture', `log logger ${show(m.logger)}`);
        expect(m.data === `${m.level} message`, `log level ${m.level} with data ${show(m.data)}`);
      }
      if (STRICT) expect(show(got()) === show(wanted), `logs ${show(got())}, want exactly ${show(wanted)}`);
    }],
    ['progress', async () => {
      const seen = [];
      const res = await call('progress', { steps: 3 }, { onprogress: (p) => seen.push([p.progress, p.total, p.message]) });
      expect(onlyText(res) === 'done 3', `progress gave ${show(texts(res))}`);
      await waitFor(() => seen.length >= 3, '3 progress notifications');
      await sleep(50);
      const want = [[1, 3, 'step 1'], [2, 3, 'step 2'], [3, 3, 'step 3']];
      expect(show(seen) === show(want), `progress ${show(seen)}, want ${show(want)}`);
    }],
    ['cancellation', async () => {
      const before = await counter();
      if (freshServer) expect(before === 0, `fresh server reports ${before} cancellations`);
      // Aborting the request's signal makes the SDK send notifications/cancelled for it and
      // reject the pending call.
      const abort = new AbortController();
      const pending = call('block', {}, { signal: abort.signal }).then(
        (res) => ({ res }),
        (err) => ({ err }),
      );
      await sleep(200);
      abort.abort('fixture cancellation');
      const outcome = await pending;
      expect(outcome.err !== undefined, `block returned instead of being cancelled: ${show(outcome.res)}`);
      const want = before + 1;
      let last;
      const deadline = Date.now() + WAIT;
      while ((last = await counter()) !== want) {
        if (Date.now() > deadline) throw new CheckFailed(`cancellations is ${last}, want ${want}`);
        await sleep(50);
      }
    }],
    ['sampling', async () => {
      const res = await call('sample', { prompt: 'hi' });
      expect(onlyText(res) === 'echo:hi', `sample gave ${show(texts(res))}`);
    }],
    ['elicitation', async () => {
      const res = await call('elicit', { message: 'name?' });
      expect(onlyText(res) === 'accept:purra', `elicit gave ${show(texts(res))}`);
    }],
    ['roots', async () => {
      const res = await call('roots');
      expect(onlyText(res) === 'file:///tmp/fixture-root', `roots gave ${show(texts(res))}`);
    }],
    ['list-changed', async () => {
      const name = `dynamic_${index + 1}`;
      const start = inbox.notes.length;
      const res = await call('add_tool', { name });
      expect(onlyText(res) === `added ${name}`, `add_tool gave ${show(texts(res))}`);
      await waitFor(
        () => inbox.notes.slice(start).some((n) => n.method === 'notifications/tools/list_changed'),
        'notifications/tools/list_changed',
      );
      const names = (await allTools(client)).map((t) => t.name);
      expect(names.includes(name), `${name} not in tools/list ${show(names)}`);
    }],
  ];
}

function fail(check, why) {
  process.stdout.write(`FAIL ${check}: ${why}\n`);
  process.exit(1);
}

async function runOnce(opts, version, index) {
  const inbox = { notes: [], logs: [] };
  const inner = opts.http
    ? new StreamableHTTPClientTransport(new URL(opts.http))
    : opts.sse
    ? new SSEClientTransport(new URL(opts.sse))
    : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: { ...process.env }, stderr: 'inherit' });
  const transport = new VersionPinningTransport(inner, version);
  const client = makeClient(inbox);
  const state = { current: 'connect', passed: 0 };
  const timer = setTimeout(
    () => fail(state.current, `[${version}] timed out (${WAIT / 1000} s per wait, ${RUN_TIMEOUT / 1000} s per run)`),
    RUN_TIMEOUT,
  );
  try {
    for (const [name, check] of checks({ client, inbox, transport, version, index, freshServer: !(opts.http || opts.sse) })) {
      state.current = name;
      await check();
      process.stdout.write(`ok ${name}\n`);
      state.passed += 1;
    }
    state.current = 'shutdown';
    if (opts.http) await inner.terminateSession?.().catch(() => {});
    await client.close();
  } catch (err) {
    if (err instanceof CheckFailed) fail(state.current, `[${version}] ${err.message}`);
    if (err instanceof McpError) fail(state.current, `[${version}] JSON-RPC error ${err.code}: ${err.message}`);
    if (err?.stack) process.stderr.write(`${err.stack}\n`);
    fail(state.current, `[${version}] ${err?.name ?? 'Error'}: ${err?.message ?? err}`);
  } finally {
    clearTimeout(timer);
  }
  return state.passed;
}

function parseArgs(argv) {
  const usage = 'usage: client.mjs [--protocol-version V]... (-- <server command> [args...] | --http URL | --sse URL)';
  const cut = argv.indexOf('--');
  const command = cut >= 0 ? argv.slice(cut + 1) : [];
  const own = cut >= 0 ? argv.slice(0, cut) : argv;
  const opts = { versions: [], http: undefined, sse: undefined, command };
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--protocol-version' && i + 1 < own.length) opts.versions.push(own[++i]);
    else if (own[i] === '--http' && i + 1 < own.length) opts.http = own[++i];
    else if (own[i] === '--sse' && i + 1 < own.length) opts.sse = own[++i];
    else {
      process.stderr.write(`${usage}\n`);
      process.exit(2);
    }
  }
  if ([Boolean(opts.http), Boolean(opts.sse), command.length > 0].filter(Boolean).length !== 1) {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  if (opts.versions.length === 0) opts.versions = DEFAULT_VERSIONS;
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
let total = 0;
for (const [index, version] of opts.versions.entries()) total += await runOnce(opts, version, index);
process.stdout.write(`fixture-client: ${total} passed, 0 failed\n`);
process.exit(0);
