#!/usr/bin/env node
// Ask an MCP server for completions with the TypeScript SDK client, and print the answers.
//
//   node complete_scenario.mjs --stdio '["mcp-jobs","serve","--app","examples.shop"]' < steps.json
//
// stdin is a JSON list of steps; ops:
//   {"id": "caps", "op": "capabilities"}                       the server's declared capabilities
//   {"id": "e", "op": "callTool", "params": {"name": …, "arguments": {…}}}
//   {"id": "c", "op": "complete", "params": {"ref": {…}, "argument": {"name": …, "value": …}}}
// A string value {"$ref": "e.result.structuredContent.job_id"} is replaced by that field of an
// earlier step's answer (so a step can complete the id another one enqueued).
// Output: {"steps": [{"id", "op", "ok": true, "result"} | {"id", "op", "ok": false, "error"}]}.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const { values } = parseArgs({
  options: {
    stdio: { type: "string" },
    "request-timeout": { type: "string", default: "20000" },
    deadline: { type: "string", default: "45000" },
  },
});
if (!values.stdio) {
  process.stderr.write("complete_scenario: give --stdio '[command, ...args]'\n");
  process.exit(2);
}
const requestTimeout = Number(values["request-timeout"]);

function resolveRefs(value, answers) {
  if (Array.isArray(value)) return value.map((v) => resolveRefs(v, answers));
  if (value === null || typeof value !== "object") return value;
  if (typeof value.$ref === "string") {
    const [id, ...path] = value.$ref.split(".");
    let found = answers.get(id);
    for (const key of path) found = found?.[key];
    if (found === undefined) throw new Error(`reference to nothing: ${value.$ref}`);
    return found;
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveRefs(v, answers)]));
}

async function run(client, step) {
  const options = { timeout: requestTimeout };
  switch (step.op) {
    case "capabilities":
      return client.getServerCapabilities();
    case "callTool":
      return client.callTool(step.params, undefined, options);
    case "complete":
      return client.complete(step.params, options);
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

async function main() {
  const steps = JSON.parse(readFileSync(0, "utf8"));
  const argv = JSON.parse(values.stdio);
  const transport = new StdioClientTransport({
    command: argv[0],
    args: argv.slice(1),
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name: "mcp-jobs-ts-completions", version: "1.0.0" });
  await client.connect(transport, { timeout: requestTimeout });
  const answers = new Map();
  const out = [];
  try {
    for (const step of steps) {
      try {
        const result = await run(client, { ...step, params: resolveRefs(step.params, answers) });
        answers.set(step.id, { result });
        out.push({ id: step.id, op: step.op, ok: true, result });
      } catch (error) {
        const described = { message: error instanceof Error ? error.message : String(error) };
        if (error instanceof McpError) described.code = error.code;
        out.push({ id: step.id, op: step.op, ok: false, error: described });
      }
    }
  } finally {
    await client.close();
  }
  return JSON.stringify({ steps: out }) + "\n";
}

// Every wait is bounded: past the deadline the run fails loudly instead of hanging its caller.
const watchdog = setTimeout(() => {
  process.stderr.write(`complete_scenario: not finished after ${values.deadline} ms\n`);
  process.exit(3);
}, Number(values.deadline));
watchdog.unref();

main().then(
  (output) => process.stdout.write(output, () => process.exit(0)),
  (error) => {
    process.stderr.write(`complete_scenario: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
