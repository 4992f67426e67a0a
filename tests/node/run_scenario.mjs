#!/usr/bin/env node
// Drive an MCP server with the TypeScript SDK client — the client MCP Inspector and most IDE
// hosts are built on — through a scenario of calls, and print one JSON document of the answers.
//
//   node run_scenario.mjs --stdio '["mcp-jobs","serve","--app","examples.shop"]' < scenario.json
//   MCP_JOBS_TOKEN=… node run_scenario.mjs --http http://127.0.0.1:8765/mcp < scenario.json
//
// The scenario (stdin, or --scenario FILE) is a JSON list of steps:
//   {"id": "enqueue", "op": "callTool", "params": {"name": "enqueue_job", "arguments": {…}}}
// ops: listTools, listResources, listResourceTemplates, readResource, listPrompts, getPrompt,
// callTool. A value {"$ref": "enqueue.result.structuredContent.job_id"} is replaced by that
// field of an earlier step's answer, so a scenario can cancel the job it enqueued, and
// {"$format": "jobs://runs/{enqueue.result.structuredContent.job_id}"} puts such fields in a string.
//
// Output: {"steps": [{"id", "op", "ok": true, "result"} | {"id", "op", "ok": false, "error"}]}.
// callTool runs the SDK's own outputSchema check (Ajv): a result that does not match throws, and
// the step's error carries "schemaViolation": true. listTools always runs first, since the SDK
// only validates tools it has listed.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const TOKEN_ENV = "MCP_JOBS_TOKEN";
// The messages Client.callTool throws when a result breaks the tool's outputSchema.
const SCHEMA_FAILURES = [
  "Structured content does not match the tool's output schema",
  "has an output schema but did not return structured content",
  "Failed to validate structured content",
];

function usage(message) {
  process.stderr.write(`run_scenario: ${message}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    stdio: { type: "string" },
    http: { type: "string" },
    cwd: { type: "string" },
    scenario: { type: "string" },
    "request-timeout": { type: "string", default: "20000" },
    deadline: { type: "string", default: "45000" },
  },
});
if (Boolean(values.stdio) === Boolean(values.http)) usage("give exactly one of --stdio or --http");
const requestTimeout = Number(values["request-timeout"]);
const deadline = Number(values.deadline);

function transportFor() {
  if (values.stdio) {
    const argv = JSON.parse(values.stdio);
    if (!Array.isArray(argv) || argv.length === 0) usage("--stdio takes a JSON list: [command, ...args]");
    // The server's stderr goes to ours, so a caller that captures it sees the server's log.
    return new StdioClientTransport({
      command: argv[0],
      args: argv.slice(1),
      env: { ...process.env },
      cwd: values.cwd,
      stderr: "inherit",
    });
  }
  const token = process.env[TOKEN_ENV];
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(values.http), { requestInit: { headers } });
}

function lookup(ref, answers) {
  const [id, ...path] = ref.split(".");
  if (!answers.has(id)) throw new Error(`reference to an unknown or failed step: ${ref}`);
  let found = answers.get(id);
  for (const key of path) {
    if (found === null || typeof found !== "object" || !(key in found)) {
      throw new Error(`reference ${ref}: no field ${key}`);
    }
    found = found[key];
  }
  return found;
}

function resolveRefs(value, answers) {
  if (Array.isArray(value)) return value.map((v) => resolveRefs(v, answers));
  if (value === null || typeof value !== "object") return value;
  if (typeof value.$ref === "string") return lookup(value.$ref, answers);
  if (typeof value.$format === "string") {
    return value.$format.replace(/\{([^}]+)\}/g, (_, ref) => String(lookup(ref, answers)));
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveRefs(v, answers)]));
}

function describeError(error) {
  const message = error instanceof Error ? error.message : String(error);
  const described = { name: error?.name ?? typeof error, message };
  if (error instanceof McpError) {
    described.code = error.code;
    if (error.data !== undefined) described.data = error.data;
  }
  described.schemaViolation = SCHEMA_FAILURES.some((m) => message.includes(m));
  return described;
}

async function run(client, step) {
  const options = { timeout: requestTimeout };
  const params = step.params ?? {};
  switch (step.op) {
    case "listTools":
      return client.listTools(params, options);
    case "listResources":
      return client.listResources(params, options);
    case "listResourceTemplates":
      return client.listResourceTemplates(params, options);
    case "readResource":
      return client.readResource(params, options);
    case "listPrompts":
      return client.listPrompts(params, options);
    case "getPrompt":
      return client.getPrompt(params, options);
    case "callTool":
      return client.callTool(params, undefined, options);
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

async function main() {
  const text = values.scenario ? readFileSync(values.scenario, "utf8") : readFileSync(0, "utf8");
  const steps = JSON.parse(text);
  if (!Array.isArray(steps)) usage("the scenario is a JSON list of steps");

  const client = new Client({ name: "mcp-jobs-ts-acceptance", version: "1.0.0" });
  await client.connect(transportFor(), { timeout: requestTimeout });
  const answers = new Map();
  const out = [];
  try {
    out.push({ id: "_listTools", op: "listTools", ok: true, result: await client.listTools({}, { timeout: requestTimeout }) });
    for (const step of steps) {
      try {
        const result = await run(client, { ...step, params: resolveRefs(step.params, answers) });
        answers.set(step.id, { result });
        out.push({ id: step.id, op: step.op, ok: true, result });
      } catch (error) {
        out.push({ id: step.id, op: step.op, ok: false, error: describeError(error) });
      }
    }
  } finally {
    await client.close();
  }
  return JSON.stringify({ server: client.getServerVersion(), steps: out }) + "\n";
}

// Every wait is bounded: past the deadline the run fails loudly instead of hanging its caller.
const watchdog = setTimeout(() => {
  process.stderr.write(`run_scenario: not finished after ${deadline} ms\n`);
  process.exit(3);
}, deadline);
watchdog.unref();

// Exit once the output is flushed: a pipe takes a large write asynchronously.
main().then(
  (output) => process.stdout.write(output, () => process.exit(0)),
  (error) => {
    process.stderr.write(`run_scenario: ${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
