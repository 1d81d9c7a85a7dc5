// The one-tool benchmark server written with the official TypeScript SDK 1.32.2 as its README shows (McpServer, registerTool):
// echo {text} and add {a, b} (structured {sum}). bench/run.sh measures it.
//
// Usage: node bench_server.mjs              (stdio)
//        node bench_server.mjs --http PORT  (Streamable HTTP on 127.0.0.1:PORT at /mcp, one transport per session)
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

function buildServer() {
  const mcp = new McpServer({ name: 'bench-typescript', version: '1.0.0' });
  mcp.registerTool('echo', { description: 'Echo the text', inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  mcp.registerTool(
    'add',
    { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } },
    async ({ a, b }) => {
      const out = { sum: a + b };
      return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    },
  );
  return mcp;
}

const args = process.argv.slice(2);
if (args[0] === '--http') {
  const port = Number(args[1]);
  const transports = new Map(); // Mcp-Session-Id -> transport
  createServer(async (req, res) => {
    try {
      const sid = req.headers['mcp-session-id'];
      let transport = sid ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid || req.method !== 'POST') {
          res.writeHead(404).end();
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await buildServer().connect(transport);
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      process.stderr.write(`bench-typescript: ${err?.stack ?? err}\n`);
      if (!res.headersSent) res.writeHead(500).end();
    }
  }).listen(port, '127.0.0.1');
} else {
  await buildServer().connect(new StdioServerTransport());
}
