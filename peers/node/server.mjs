// Interop fixture server (peers/FIXTURES.md) built on the official TypeScript MCP SDK 1.32.2 (McpServer + low-level handlers).
//
// Usage: node server.mjs              (stdio)
//        node server.mjs --http PORT  (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp)
//        node server.mjs --sse PORT   (HTTP+SSE of 2024-11-05: GET /sse, POST /messages)
//
// Tools and the greet prompt (with its completion) use McpServer; resources use low-level
// handlers on McpServer.server, since McpServer cannot paginate resources/list nor answer
// resources/subscribe.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import {
  CreateMessageResultSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListRootsResultSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const PAGE_SIZE = 2;
const RESOURCES = [
  ...[1, 2, 3, 4, 5].map((n) => ({ uri: `fixture://static/${n}`, name: `static-${n}`, mimeType: 'text/plain' })),
  { uri: 'fixture://watched', name: 'watched', mimeType: 'text/plain' },
];
const RESOURCE_TEXT = new Map([
  ...[1, 2, 3, 4, 5].map((n) => [`fixture://static/${n}`, `static ${n}`]),
  ['fixture://watched', 'watched'],
]);

// ---- process-wide state (shared by every connection) ----
let cancellations = 0;
const dynamicTools = []; // names registered with add_tool
const subscribers = new Map(); // McpServer -> Set of subscribed uris
const servers = new Set(); // every connected McpServer

const text = (t) => ({ type: 'text', text: t });
const result = (t, extra = {}) => ({ content: [text(t)], ...extra });
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });

const registered = new WeakMap(); // McpServer -> Set of dynamic tool names it has

function registerDynamic(mcp, name) {
  if (!registered.has(mcp)) registered.set(mcp, new Set());
  if (registered.get(mcp).has(name)) return false;
  registered.get(mcp).add(name);
  mcp.registerTool(name, { description: 'Registered at runtime', inputSchema: {} }, async () => result(`${name} called`));
  return true;
}

function encodeCursor(offset) {
  return Buffer.from(`offset:${offset}`).toString('base64url');
}

function decodeCursor(cursor) {
  if (!cursor) return 0;
  const m = /^offset:(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (!m) throw new McpError(ErrorCode.InvalidParams, 'invalid cursor');
  return Number(m[1]);
}

function buildServer() {
  const mcp = new McpServer(
    { name: 'fixture-node', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const server = mcp.server;
  const related = (extra) => ({ relatedRequestId: extra.requestId });

  mcp.registerTool('echo', { description: 'Echo the text', inputSchema: { text: z.string() } }, async ({ text: t }) =>
    result(t),
  );
  mcp.registerTool(
    'add',
    {
      description: 'Add two numbers',
      inputSchema: { a: z.number(), b: z.number() },
      outputSchema: { sum: z.number() },
    },
    async ({ a, b }) => result(JSON.stringify({ sum: a + b }), { structuredContent: { sum: a + b } }),
  );
  mcp.registerTool('fail', { description: 'Always fails', inputSchema: {} }, async () =>
    result('fixture failure', { isError: true }),
  );
  mcp.registerTool(
    'progress',
    { description: 'Reports progress', inputSchema: { steps: z.number().int() } },
    async ({ steps }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: i, total: steps, message: `step ${i}` },
          });
        }
        await sleep(20);
      }
      return result(`done ${steps}`);
    },
  );
  mcp.registerTool('block', { description: 'Waits until cancelled', inputSchema: {} }, async (_args, extra) => {
    // The SDK aborts extra.signal when notifications/cancelled names this request, and then
    // drops whatever the handler returns.
    await sleep(30_000, extra.signal);
    if (extra.signal.aborted) {
      cancellations += 1;
      return result('cancelled');
    }
    return result('not cancelled');
  });
  mcp.registerTool('cancellations', { description: 'Cancellation counter', inputSchema: {} }, async () =>
    result(String(cancellations)),
  );
  mcp.registerTool('log', { description: 'Logs at four levels', inputSchema: {} }, async (_args, extra) => {
    for (const level of ['debug', 'info', 'warning', 'error']) {
      // Server.isMessageIgnored is the SDK's own level filter (what sendLoggingMessage uses);
      // sending through extra keeps the messages on this request's stream over HTTP.
      if (!server.isMessageIgnored(level, extra.sessionId)) {
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level, logger: 'fixture', data: `${level} message` },
        });
      }
    }
    return result('logged');
  });
  mcp.registerTool(
    'sample',
    { description: 'Asks the client to sample', inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      const res = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: text(prompt) }], maxTokens: 64 },
        },
        CreateMessageResultSchema,
      );
      const content = Array.isArray(res.content) ? res.content : [res.content];
      return result(content.filter((c) => c.type === 'text').map((c) => c.text).join(''));
    },
  );
  mcp.registerTool(
    'elicit',
    { description: 'Asks the client to elicit', inputSchema: { message: z.string() } },
    async ({ message }, extra) => {
      const res = await server.elicitInput(
        {
          message,
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
        },
        related(extra),
      );
      return result(`${res.action}:${res.content?.name ?? ''}`);
    },
  );
  mcp.registerTool('roots', { description: "Lists the client's roots", inputSchema: {} }, async (_args, extra) => {
    const res = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema);
    return result(res.roots.map((r) => r.uri).join(','));
  });
  mcp.registerTool(
    'add_tool',
    { description: 'Registers a tool at runtime', inputSchema: { name: z.string() } },
    async ({ name }) => {
      if (!dynamicTools.includes(name)) dynamicTools.push(name);
      for (const s of servers) {
        // registerTool on a connected McpServer sends notifications/tools/list_changed itself;
        // a name this connection already has still gets the notification the contract asks for.
        if (!registerDynamic(s, name) && s === mcp) mcp.sendToolListChanged();
      }
      return result(`added ${name}`);
    },
  );
  mcp.registerTool(
    'touch',
    { description: 'Sends resources/updated', inputSchema: { uri: z.string() } },
    async ({ uri }, extra) => {
      for (const [s, uris] of subscribers) {
        if (!uris.has(uri)) continue;
        if (s === mcp) {
          await extra.sendNotification({ method: 'notifications/resources/updated', params: { uri } });
        } else {
          await s.server.sendResourceUpdated({ uri }).catch(() => subscribers.delete(s));
        }
      }
      return result(`touched ${uri}`);
    },
  );
  for (const name of dynamicTools) registerDynamic(mcp, name);

  mcp.registerPrompt(
    'greet',
    {
      description: 'Greeting',
      argsSchema: {
        name: completable(z.string(), (value) => ['alice', 'alan', 'bob'].filter((v) => v.startsWith(value ?? ''))),
        style: z.string().optional(),
      },
    },
    async ({ name, style }) => {
      const greeting = `Hello, ${name}!`;
      return {
        description: 'Greeting',
        messages: [{ role: 'user', content: text(style === 'loud' ? greeting.toUpperCase() : greeting) }],
      };
    },
  );

  server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
    const start = decodeCursor(request.params?.cursor);
    const out = { resources: RESOURCES.slice(start, start + PAGE_SIZE) };
    if (start + PAGE_SIZE < RESOURCES.length) out.nextCursor = encodeCursor(start + PAGE_SIZE);
    return out;
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{ uriTemplate: 'fixture://items/{id}', name: 'item', mimeType: 'text/plain' }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    let body = RESOURCE_TEXT.get(uri);
    const item = /^fixture:\/\/items\/(.+)$/.exec(uri);
    if (body === undefined && item) body = `item ${item[1]}`;
    if (body === undefined) throw new McpError(-32002, `resource not found: ${uri}`, { uri });
    return { contents: [{ uri, mimeType: 'text/plain', text: body }] };
  });
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    if (!subscribers.has(mcp)) subscribers.set(mcp, new Set());
    subscribers.get(mcp).add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscribers.get(mcp)?.delete(request.params.uri);
    return {};
  });

  servers.add(mcp);
  server.onclose = () => {
    servers.delete(mcp);
    subscribers.delete(mcp);
  };
  return mcp;
}

async function serveStdio() {
  await buildServer().connect(new StdioServerTransport());
}

function serveHttp(port) {
  const transports = new Map(); // Mcp-Session-Id -> transport
  const http = createServer(async (req, res) => {
    try {
      if (new URL(req.url, 'http://127.0.0.1').pathname !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      const sid = req.headers['mcp-session-id'];
      let transport = sid ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid || req.method !== 'POST') {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'unknown session' }, id: null }));
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
          onsessionclosed: (id) => transports.delete(id),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await buildServer().connect(transport);
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      process.stderr.write(`fixture-node: ${err?.stack ?? err}\n`);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  http.listen(port, '127.0.0.1', () => process.stderr.write(`fixture-node: listening on http://127.0.0.1:${port}/mcp\n`));
}

// The deprecated HTTP+SSE transport: one SSEServerTransport per GET /sse, found again by the
// sessionId of each POST /messages. Anything else (a Streamable HTTP POST) is 405 or 404.
function serveSse(port) {
  const transports = new Map(); // sessionId -> transport
  const http = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://127.0.0.1');
      if (url.pathname === '/sse') {
        if (req.method !== 'GET') {
          res.writeHead(405, { allow: 'GET' }).end();
          return;
        }
        const transport = new SSEServerTransport('/messages', res);
        transports.set(transport.sessionId, transport);
        res.on('close', () => transports.delete(transport.sessionId));
        await buildServer().connect(transport);
        return;
      }
      if (url.pathname === '/messages' && req.method === 'POST') {
        const transport = transports.get(url.searchParams.get('sessionId'));
        if (!transport) {
          res.writeHead(404).end('unknown session');
          return;
        }
        await transport.handlePostMessage(req, res);
        return;
      }
      res.writeHead(404).end();
    } catch (err) {
      process.stderr.write(`fixture-node: ${err?.stack ?? err}\n`);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  http.listen(port, '127.0.0.1', () => process.stderr.write(`fixture-node: listening on http://127.0.0.1:${port}/sse\n`));
}

const args = process.argv.slice(2);
const httpAt = args.indexOf('--http');
const sseAt = args.indexOf('--sse');
if (sseAt >= 0) {
  const port = Number(args[sseAt + 1]);
  if (!Number.isInteger(port) || port <= 0) {
    process.stderr.write('usage: server.mjs [--http PORT | --sse PORT]\n');
    process.exit(2);
  }
  serveSse(port);
} else if (httpAt >= 0) {
  const port = Number(args[httpAt + 1]);
  if (!Number.isInteger(port) || port <= 0) {
    process.stderr.write('usage: server.mjs [--http PORT]\n');
    process.exit(2);
  }
  serveHttp(port);
} else {
  await serveStdio();
}
