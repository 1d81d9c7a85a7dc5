// Protocol round-trip benchmark with the official TypeScript SDK client, the counterpart of purra's bench/src/bin/stdio-echo.rs.
// Usage: node bench_client.mjs [--calls N] [--concurrency K] -- SERVER COMMAND...
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const argv = process.argv.slice(2);
let calls = 20000;
let concurrency = 16;
const sep = argv.indexOf('--');
const opts = argv.slice(0, sep);
const command = argv.slice(sep + 1);
for (let i = 0; i < opts.length; i += 2) {
  if (opts[i] === '--calls') calls = Number(opts[i + 1]);
  else if (opts[i] === '--concurrency') concurrency = Number(opts[i + 1]);
  else throw new Error(`unknown argument ${opts[i]}`);
}
const transport = new StdioClientTransport({ command: command[0], args: command.slice(1), env: process.env, stderr: 'ignore' });
const client = new Client({ name: 'bench-ts', version: '1.0.0' });
await client.connect(transport);
const args = { text: 'hello, purra' };
const call = () => client.callTool({ name: 'echo', arguments: args });
for (let i = 0; i < 500; i++) await call();
const lat = [];
let start = process.hrtime.bigint();
for (let i = 0; i < calls; i++) {
  const t = process.hrtime.bigint();
  await call();
  lat.push(Number(process.hrtime.bigint() - t) / 1000);
}
const seq = calls / (Number(process.hrtime.bigint() - start) / 1e9);
lat.sort((a, b) => a - b);
const p = (q) => Math.round(lat[Math.floor((lat.length - 1) * q)]);
const per = Math.floor(calls / concurrency);
start = process.hrtime.bigint();
await Promise.all(Array.from({ length: concurrency }, async () => {
  for (let i = 0; i < per; i++) await call();
}));
const conc = (per * concurrency) / (Number(process.hrtime.bigint() - start) / 1e9);
console.log(JSON.stringify({
  client: 'typescript-sdk-1.32.2', calls, sequential_calls_per_s: Math.round(seq), p50_us: p(0.5), p99_us: p(0.99),
  concurrency, concurrent_calls_per_s: Math.round(conc),
}));
await client.close();
