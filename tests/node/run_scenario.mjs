#!/usr/bin/env node
// Drive an MCP server with the TypeScript SDK client — the client MCP Inspector and most IDE
// hosts are built on — through a scenario of calls, and print one JSON document of the answers.
//
//   node run_scenario.mjs --stdio '["mcp-jobs","serve","--app","examples.shop"]' < scenario.json
//   MCP_JOBS_TOKEN=… node run_scenario.mjs --http http://127.0.0.1:8765/mcp < scenario.json
//
// The scenario (stdin, or --scenario FILE) is a JSON list of steps:
//   {"id": "enqueue", "op": "callTool", "params": {"name": "enqueue_job", "arguments": {…}}}
// ops:
//   listTools, listResources, listResourceTemplates, readResource, listPrompts, getPrompt,
//   callTool (the SDK's own outputSchema check, Ajv: a result that does not match throws, and the
//   step's error carries "schemaViolation": true), capabilities, complete {ref, argument}
//   tasks (2025-11-25): startTask {name, arguments} (callToolStream, stopped at taskCreated);
//     streamTool {name, arguments, onWorking} (to its end; `onWorking`, an argv, runs once at the
//     first `working` status); getTask, getTaskResult, cancelTask {taskId}; listTasks {cursor}
//   subscriptions: subscribe {uri}, unsubscribe {uri}, waitUpdated {uri, timeoutMs} (until a
//     notifications/resources/updated for `uri` has arrived; bounded)
//   exec {argv}: run a command to its end (a worker, say)
// A value {"$ref": "enqueue.result.structuredContent.job_id"} is replaced by that field of an
// earlier step's answer; "$template": "jobs://runs/{}" beside it puts the field in a string, and
// {"$format": "jobs://runs/{enqueue.result.structuredContent.job_id}"} does so for several.
//
// Output: {"server", "capabilities", "steps": [{"id", "op", "ok", "result" | "error"}],
// "taskStatus": [...], "resourceUpdated": [...]} (the notifications' params, in order of arrival).
// listTools always runs first, since the SDK validates and knows the task support only of tools it
// has listed.

import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  TaskStatusNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const TOKEN_ENV = "MCP_JOBS_TOKEN";
const TASK_TTL_MS = 60000;
// The messages the SDK throws (or yields) when a result breaks the tool's outputSchema.
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
  if (typeof value.$ref === "string") {
    const found = lookup(value.$ref, answers);
    return typeof value.$template === "string" ? value.$template.replace("{}", String(found)) : found;
  }
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

function exec(argv) {
  const done = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", timeout: requestTimeout, cwd: values.cwd });
  if (done.error) throw done.error;
  if (done.status !== 0) throw new Error(`${argv.join(" ")} exited ${done.status}: ${done.stderr.slice(-2000)}`);
  return { status: done.status };
}

// The notifications so far, and whoever waits for the next resource update.
const taskStatus = [];
const resourceUpdated = [];
let arrived = () => {};

function waitUpdated(uri, timeoutMs) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      arrived = () => {};
      reject(new Error(`no notifications/resources/updated for ${uri} within ${timeoutMs} ms`));
    }, timeoutMs);
    const check = () => {
      const found = resourceUpdated.find((n) => n.uri === uri);
      if (!found) return;
      clearTimeout(timer);
      arrived = () => {};
      resolve(found);
    };
    arrived = check;
    check();
  });
}

// A stream message as JSON (an error yielded by the stream is an McpError object).
function plain(message) {
  return message.type === "error" ? { type: "error", error: describeError(message.error) } : message;
}

async function stream(client, params, options, onWorking, untilCreated) {
  const messages = [];
  let ran = false;
  const taskOptions = { ...options, task: { ttl: TASK_TTL_MS } };
  for await (const message of client.experimental.tasks.callToolStream(params, CallToolResultSchema, taskOptions)) {
    messages.push(plain(message));
    if (untilCreated && message.type === "taskCreated") break; // ends the generator: no polling
    if (onWorking && !ran && message.type === "taskStatus" && message.task.status === "working") {
      ran = true;
      exec(onWorking);
    }
  }
  return { messages };
}

async function run(client, step) {
  const options = { timeout: requestTimeout };
  const params = step.params ?? {};
  const tasks = client.experimental.tasks;
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
    case "capabilities":
      return client.getServerCapabilities();
    case "complete":
      return client.complete(params, options);
    case "startTask": {
      const { messages } = await stream(client, params, options, null, true);
      const created = messages.find((m) => m.type === "taskCreated");
      if (!created) throw Object.assign(new Error("no taskCreated"), { messages });
      return { task: created.task };
    }
    case "streamTool":
      return stream(client, { name: params.name, arguments: params.arguments }, options, params.onWorking, false);
    case "getTask":
      return tasks.getTask(params.taskId, options);
    case "getTaskResult":
      return tasks.getTaskResult(params.taskId, CallToolResultSchema, options);
    case "cancelTask":
      return tasks.cancelTask(params.taskId, options);
    case "listTasks":
      return tasks.listTasks(params.cursor, options);
    case "subscribe":
      return client.subscribeResource({ uri: params.uri }, options);
    case "unsubscribe":
      return client.unsubscribeResource({ uri: params.uri }, options);
    case "waitUpdated":
      return waitUpdated(params.uri, Number(params.timeoutMs ?? requestTimeout));
    case "exec":
      return exec(params.argv);
    default:
      throw new Error(`unknown op ${step.op}`);
  }
}

async function main() {
  const text = values.scenario ? readFileSync(values.scenario, "utf8") : readFileSync(0, "utf8");
  const steps = JSON.parse(text);
  if (!Array.isArray(steps)) usage("the scenario is a JSON list of steps");

  const client = new Client({ name: "mcp-jobs-ts-acceptance", version: "1.0.0" }, { capabilities: {} });
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
    taskStatus.push(n.params);
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    resourceUpdated.push(n.params);
    arrived();
  });
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
  const document = {
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    steps: out,
    taskStatus,
    resourceUpdated,
  };
  return JSON.stringify(document) + "\n";
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
