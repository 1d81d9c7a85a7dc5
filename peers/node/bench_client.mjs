// The official TypeScript SDK 1.32.2 client as a stdio benchmark client, the counterpart of purra's bench/src/bin/bench-client.rs:
// echo calls with distinct texts, every answer checked, one at a time and then K in flight.
// Usage: node bench_client.mjs [--calls N] [--concurrency K] -- SERVER COMMAND...; prints one JSON line, exits 1 on a wrong answer.
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
const call = async (n) => {
  const text = `hello, purra ${n}`;
  const res = await client.callTool({ name: 'echo', arguments: { text } });
  if (res.isError || res.content?.[0]?.text !== text) {
    process.stderr.write(`bench_client.mjs: call ${n}: wrong answer ${JSON.stringify(res)}\n`);
    process.exit(1);
  }
};
for (let i = 0; i < 500; i++) await call(i);
const lat = [];
let start = process.hrtime.bigint();
for (let i = 0; i < calls; i++) {
  const t = process.hrtime.bigint();
  await call(i);
  lat.push(Number(process.hrtime.bigint() - t) / 1000);
}
const seq = calls / (Number(process.hrtime.bigint() - start) / 1e9);
lat.sort((a, b) => a - b);
const p = (q) => Math.round(lat[Math.floor((lat.length - 1) * q)]);
const per = Math.floor(calls / concurrency);
start = process.hrtime.bigint();
await Promise.all(Array.from({ length: concurrency }, async (_, k) => {
  for (let i = 0; i < per; i++) await call(k * per + i);
}));
const conc = (per * concurrency) / (Number(process.hrtime.bigint() - start) / 1e9);
console.log(JSON.stringify({
  client: 'typescript-sdk-1.32.2', calls, sequential_calls_per_s: Math.round(seq), p50_us: p(0.5), p99_us: p(0.99),
  concurrency, concurrent_calls_per_s: Math.round(conc),
}));
await client.close();
