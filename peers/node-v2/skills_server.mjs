// Skills interop peer (SEP-2640) on the official TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0): the
// skills of a folder of skill folders, loaded with `loadSkills` from `./ext/skills/node` and attached to the
// server, as the SDK's documentation shows.
//
// Usage: node skills_server.mjs DIR              (stdio: serveStdio; both eras)
//        node skills_server.mjs DIR --http PORT  (Streamable HTTP on 127.0.0.1:PORT, endpoint /mcp: createMcpHandler)
//
// Server `fixture-node-skills` 1.0.0: no tools; the skills of DIR (strict: a problem fails the start).
import { createServer } from 'node:http';

import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { loadSkills } from '@modelcontextprotocol/server/ext/skills/node';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const args = process.argv.slice(2);
if (args.length !== 1 && !(args.length === 3 && args[1] === '--http')) {
    console.error('usage: node skills_server.mjs DIR [--http PORT]');
    process.exit(2);
}
const catalog = await loadSkills(args[0], { strict: true });

function buildServer() {
    const server = new McpServer({ name: 'fixture-node-skills', version: '1.0.0' });
    catalog.attach(server);
    return server;
}

if (args.length === 1) {
    serveStdio(buildServer);
} else {
    const handler = createMcpHandler(buildServer);
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
    http.listen(Number(args[2]), '127.0.0.1', () => console.error(`listening on http://127.0.0.1:${http.address().port}/mcp`));
}
