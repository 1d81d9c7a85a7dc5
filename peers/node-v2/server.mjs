// Interop peer for the 2026-07-28 revision (peers/FIXTURES.md, "2026-07-28"), on the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0).
//
// Usage: node server.mjs              (stdio: serveStdio)
//        node server.mjs --http PORT  (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp: createMcpHandler)
//
// Server `fixture-node-modern`: `echo`, `elicit` (returns inputRequired(...) until the client retries with the
// answer; the requestState is sealed by the SDK's codec) and `add_tool` (registers a tool and publishes the tools
// list change to subscriptions/listen streams).
import { createServer } from 'node:http';

import {
    acceptedContent,
    createMcpHandler,
    createRequestStateCodec,
    inputRequired,
    McpServer
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod/v4';

const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
const stateCodec = createRequestStateCodec({ key: crypto.getRandomValues(new Uint8Array(32)), ttlSeconds: 600 });

// Tools added at runtime, shared by every instance the factory builds (HTTP builds one per request).
const added = [];
// Called after a tool is added: announces the change to the listen streams.
let announce = () => {};

function registerAdded(server, name) {
    server.registerTool(name, { description: 'A tool added at runtime' }, async () => ({
        content: [{ type: 'text', text: `${name} called` }]
    }));
}

function buildServer() {
    const server = new McpServer(
        { name: 'fixture-node-modern', version: '1.0.0' },
        { capabilities: { tools: { listChanged: true } }, requestState: { verify: stateCodec.verify } }
    );
    server.registerTool(
        'echo',
        { description: 'Echoes the text', inputSchema: z.object({ text: z.string() }) },
        async ({ text }) => ({ content: [{ type: 'text', text }] })
    );
    server.registerTool(
        'elicit',
        { description: 'Asks the user for a name (an input_required round trip)', inputSchema: z.object({ message: z.string() }) },
        async ({ message }, ctx) => {
            const responses = ctx.mcpReq.inputResponses;
            const answer = responses?.name;
            if (!answer) {
                return inputRequired({
                    inputRequests: { name: inputRequired.elicit({ message, requestedSchema: NAME_SCHEMA }) },
                    requestState: await stateCodec.mint({ asked: 'name' })
                });
            }
            const content = acceptedContent(responses, 'name');
            return { content: [{ type: 'text', text: `${answer.action}:${content?.name ?? ''}` }] };
        }
    );
    server.registerTool(
        'add_tool',
        { description: 'Registers a tool at runtime and announces the tools list change', inputSchema: z.object({ name: z.string() }) },
        async ({ name }) => {
            if (!added.includes(name)) {
                added.push(name);
                registerAdded(server, name);
            }
            announce(server);
            return { content: [{ type: 'text', text: `added ${name}` }] };
        }
    );
    for (const name of added) registerAdded(server, name);
    return server;
}

const args = process.argv.slice(2);
if (args.length === 0) {
    // One instance is pinned for the connection: it announces its own change.
    announce = server => server.sendToolListChanged();
    serveStdio(buildServer);
} else if (args[0] === '--http' && args.length === 2) {
    const handler = createMcpHandler(buildServer);
    announce = () => handler.notify.toolsChanged();
    const port = Number(args[1]);
    const http = createServer(async (req, res) => {
        try {
            const chunks = [];
            for await (const c of req) chunks.push(c);
            const body = Buffer.concat(chunks);
            const controller = new AbortController();
            res.on('close', () => controller.abort());
            const request = new Request(`http://${req.headers.host}${req.url}`, {
                method: req.method,
                headers: req.headers,
                body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
                signal: controller.signal
            });
            const response = await handler.fetch(request);
            res.writeHead(response.status, Object.fromEntries(response.headers));
            if (response.body) {
                for await (const chunk of response.body) res.write(chunk);
            }
            res.end();
        } catch (e) {
            if (!res.headersSent) res.writeHead(500);
            res.end(String(e));
        }
    });
    http.listen(port, '127.0.0.1', () => console.error(`listening on http://127.0.0.1:${http.address().port}/mcp`));
} else {
    console.error('usage: node server.mjs [--http PORT]');
    process.exit(2);
}
