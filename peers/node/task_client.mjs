// The official TypeScript SDK client running 2025-11-25 tasks on a server (purra's conformance
// server in crates/purra-conformance/tests/it/tasks_interop.rs): a task that asks for confirmation
// (input_required, answered by the elicitation handler), a task cancelled while it runs, and
// tasks/list. Prints one JSON document of what it saw. Usage: node task_client.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2];
const client = new Client(
  { name: "ts-task-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { confirm: true } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const confirm = { messages: [], statuses: [] };
for await (const m of client.experimental.tasks.callToolStream(
  { name: "confirm_delete", arguments: { filename: "a.txt" } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
)) {
  confirm.messages.push(m.type);
  if (m.type === "taskStatus") confirm.statuses.push(m.task.status);
  if (m.type === "result") confirm.result = m.result.content[0].text;
  if (m.type === "error") confirm.error = String(m.error);
}

const cancel = {};
for await (const m of client.experimental.tasks.callToolStream(
  { name: "slow_compute", arguments: { seconds: 60 } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
)) {
  if (m.type === "taskCreated") {
    cancel.created = m.task.status;
    const r = await client.experimental.tasks.cancelTask(m.task.taskId);
    cancel.ack = r.status;
    cancel.after = (await client.experimental.tasks.getTask(m.task.taskId)).status;
    break;
  }
}
const listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.status).sort();
console.log(JSON.stringify({ asked, confirm, cancel, listed }));
await client.close();
