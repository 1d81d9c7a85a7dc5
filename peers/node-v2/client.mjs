// Interop peer for the 2026-07-28 revision (peers/FIXTURES.md, "2026-07-28"), on the official TypeScript SDK v2
// (@modelcontextprotocol/client 2.4.0).
//
// Usage: node client.mjs URL                 (checks a Streamable HTTP server)
//        node client.mjs -- CMD [ARGS...]     (checks a stdio server it starts)
//
// Auto version negotiation (the server/discover probe); prints `ok <check>` per check, `FAIL <check>: <why>` and
// exit 1 on the first failure, `modern-client: N passed, 0 failed` at the end.
import { Client, isInputRequiredResult, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const MODERN = '2026-07-28';
const args = process.argv.slice(2);
let transport;
if (args[0] === '--' && args.length >= 2) {
    transport = new StdioClientTransport({ command: args[1], args: args.slice(2), stderr: 'inherit' });
} else if (args.length === 1) {
    transport = new StreamableHTTPClientTransport(new URL(args[0]));
} else {
    console.error('usage: node client.mjs URL | -- CMD [ARGS...]');
    process.exit(2);
}

let passed = 0;
const ok = name => {
    passed += 1;
    console.log(`ok ${name}`);
};
const fail = (name, why) => {
    console.log(`FAIL ${name}: ${why}`);
    process.exit(1);
};
const text = r => (r?.content?.[0]?.type === 'text' ? r.content[0].text : undefined);
const withTimeout = (promise, ms, what) =>
    Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

const client = new Client(
    { name: 'fixture-node-modern-client', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } }
);
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'purra' } }));

try {
    await withTimeout(client.connect(transport), 20000, 'connect');
    const version = client.getNegotiatedProtocolVersion();
    if (version !== MODERN) fail('discover', `spoke ${version}, not ${MODERN}`);
    ok('discover');

    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    if (text(echoed) !== 'hello') fail('echo', JSON.stringify(echoed));
    ok('echo');

    const elicited = await client.callTool({ name: 'elicit', arguments: { message: 'Who are you?' } });
    if (text(elicited) !== 'accept:purra') fail('elicit-input-required', JSON.stringify(elicited));
    ok('elicit-input-required');

    const first = await client.request(
        { method: 'tools/call', params: { name: 'elicit', arguments: { message: 'Who are you?' } } },
        { allowInputRequired: true }
    );
    if (!isInputRequiredResult(first) || !first.requestState || !first.inputRequests) {
        fail('tampered-state', `expected input_required with a requestState, got ${JSON.stringify(first)}`);
    }
    const state = first.requestState;
    const middle = Math.floor(state.length / 2);
    const tampered = state.slice(0, middle) + (state[middle] === 'A' ? 'B' : 'A') + state.slice(middle + 1);
    const inputResponses = Object.fromEntries(
        Object.keys(first.inputRequests).map(key => [key, { action: 'accept', content: { name: 'x' } }])
    );
    try {
        const got = await client.request(
            { method: 'tools/call', params: { name: 'elicit', arguments: { message: 'Who are you?' }, inputResponses, requestState: tampered } },
            { allowInputRequired: true }
        );
        fail('tampered-state', `a tampered requestState was accepted: ${JSON.stringify(got)}`);
    } catch (e) {
        if (e?.code !== -32602) fail('tampered-state', `expected -32602, got ${e?.code} ${e}`);
    }
    ok('tampered-state');

    let changed;
    const change = new Promise(resolve => (changed = resolve));
    client.setNotificationHandler('notifications/tools/list_changed', async () => changed());
    const subscription = await withTimeout(client.listen({ toolsListChanged: true }), 10000, 'listen');
    if (!subscription.honoredFilter.toolsListChanged) {
        fail('listen-list-changed', `tools changes not honoured: ${JSON.stringify(subscription.honoredFilter)}`);
    }
    await client.callTool({ name: 'add_tool', arguments: { name: 'late' } });
    await withTimeout(change, 10000, 'notifications/tools/list_changed');
    const names = [];
    let cursor;
    for (let page = 0; page < 50; page++) {
        const r = await client.listTools(cursor ? { cursor } : undefined, { cacheMode: 'refresh' });
        names.push(...r.tools.map(t => t.name));
        cursor = r.nextCursor;
        if (!cursor) break;
    }
    if (!names.includes('late')) fail('listen-list-changed', `late is not listed: ${names}`);
    await subscription.close();
    ok('listen-list-changed');

    await client.close();
    console.log(`modern-client: ${passed} passed, 0 failed`);
    process.exit(0);
} catch (e) {
    fail('unexpected', e?.stack ?? String(e));
}
