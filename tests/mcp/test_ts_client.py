"""Acceptance with a real third-party client: the TypeScript SDK client (npm
`@modelcontextprotocol/sdk`, the client MCP Inspector and most IDE hosts are built on) drives
`mcp-jobs serve --app examples.shop` over stdio and over HTTP with a bearer token.

Every tool, resource and prompt is called with valid arguments and with invalid ones. The client
checks each tool result against the tool's outputSchema with Ajv and throws on a mismatch: a
step that threw with `schemaViolation` is a result a strict client rejects. The scenario runs
once per transport (one client process, one server); the tests below read its answers.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_jobs.server.apps_ui import DASHBOARD_URI as APP_URI
from tests.mcp.tsclient_support import ScenarioRun, http_server, make_shop, run_scenario, toolchain

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]  # a cold `npm ci` fits in it

BACKFILL = "normalize_emails"
ORDER = {"order_id": 1, "sku": "tea-green", "quantity": 2}
JOB = {"$ref": "enqueue.result.structuredContent.job_id"}
UNKNOWN_JOB = "0" * 32
BOGUS = "bogus_argument"


def call(step_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": step_id, "op": "callTool", "params": {"name": tool, "arguments": arguments}}


def read(step_id: str, uri: str | dict[str, str]) -> dict[str, Any]:
    return {"id": step_id, "op": "readResource", "params": {"uri": uri}}


def prompt(step_id: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    return {"id": step_id, "op": "getPrompt", "params": {"name": name, "arguments": arguments}}


STRICT_WRITE = call("write_yes", "run_backfill", {"name": BACKFILL, "write": "yes"})
LIVE = ["ready", "delayed", "running", "suspended"]
PASS_JOB = {"$ref": "backfill_write.result.structuredContent.start.job_id"}

# Valid calls, in an order that gives each one something to act on (and, where their answers
# prove something about them, two that are refused: NOT_OK).
FLOW: list[dict[str, Any]] = [
    {"id": "list_resources", "op": "listResources"},
    {"id": "list_templates", "op": "listResourceTemplates"},
    {"id": "list_prompts", "op": "listPrompts"},
    call("describe_all", "describe_jobs", {}),
    call("describe_one", "describe_jobs", {"name": "fulfil_order"}),
    call("enqueue", "enqueue_job", {"name": "fulfil_order", "input": ORDER}),
    call(
        "enqueue_tenant",
        "enqueue_job",
        {
            "name": "send_receipt",
            "input": {"order_id": 1, "email": "ana@shop.example"},
            "tenant_id": "storefront-a",
        },
    ),
    call(
        "enqueue_delayed",
        "enqueue_job",
        {
            "name": "import_supplier_prices",
            "input": {"supplier": "leafco", "batch": "2026-05"},
            "delay_seconds": 3600,
        },
    ),
    call("list_page1", "list_jobs", {"limit": 1}),
    call(
        "list_page2",
        "list_jobs",
        {"limit": 1, "cursor": {"$ref": "list_page1.result.structuredContent.next_cursor"}},
    ),
    call("list_filtered", "list_jobs", {"state": ["ready", "delayed"], "queue": "orders"}),
    call("inspect", "inspect_job", {"job_id": JOB, "steps_limit": 10, "events_limit": 10}),
    call("stats_all", "queue_stats", {}),
    call("stats_orders", "queue_stats", {"queues": ["orders"]}),
    call("diagnose_all", "diagnose_queue", {}),
    call("diagnose_orders", "diagnose_queue", {"queue": "orders"}),
    call("db_report", "database_report", {}),
    call("backfills_all", "list_backfills", {}),
    call("backfills_pending", "list_backfills", {"pending_only": True}),
    call("backfill_dry", "run_backfill", {"name": BACKFILL}),
    call("cancel", "cancel_job", {"job_id": JOB}),
    call("cancel_again", "cancel_job", {"job_id": JOB}),
    call("wait", "wait_for_job", {"job_id": JOB, "timeout_seconds": 5}),
    call("retry", "retry_job", {"job_id": JOB, "include_cancelled": True}),
    call("prune_dry", "prune_history", {}),
    call("prune_dry_old", "prune_history", {"older_than_seconds": 86400, "states": ["done"]}),
    call("pause", "pause_queue", {"queue": "emails", "reason": "smtp down"}),
    call("resume", "resume_queue", {"queue": "emails"}),
    call("send_event", "send_event", {"name": "payment.settled", "key": "42"}),
    call("retry_plan", "retry_jobs", {"name": "fulfil_order", "since_seconds": 3600}),
    call("cancel_plan", "cancel_jobs", {"queue": "emails", "states": ["delayed"]}),
    # This client declares no elicitation: the write carries its dry run's confirm token.
    call(
        "backfill_write",
        "run_backfill",
        {
            "name": BACKFILL,
            "write": True,
            "confirm": {"$ref": "backfill_dry.result.structuredContent.confirm.token"},
        },
    ),
    call("backfill_cancel", "cancel_job", {"job_id": PASS_JOB}),
    # The string-for-a-boolean write (STRICT_WRITE) runs here, with no pass live: the ledger and
    # the backfills queue right after it show whether it started one.
    STRICT_WRITE,
    call("yes_backfill", "list_backfills", {"name": BACKFILL}),
    call("yes_jobs", "list_jobs", {"queue": "backfills", "state": LIVE}),
    read("res_descriptors", "jobs://descriptors"),
    read("res_backfills", "jobs://backfills"),
    read("res_stats", "jobs://stats"),
    read("res_app", APP_URI),
    read("res_descriptor", "jobs://descriptors/fulfil_order"),
    read("res_run", {"$format": "jobs://runs/{enqueue.result.structuredContent.job_id}"}),
    prompt("prompt_diagnose", "diagnose_stalled_jobs", {}),
    prompt("prompt_diagnose_queue", "diagnose_stalled_jobs", {"queue": "orders"}),
    prompt("prompt_backfill", "run_backfill_safely", {"name": BACKFILL}),
]
NOT_OK = {"cancel_again", "write_yes"}  # asserted by their own tests below

# The smallest valid arguments of each tool: with an undeclared argument added, each is refused.
MINIMAL: dict[str, dict[str, Any]] = {
    "describe_jobs": {},
    "list_jobs": {},
    "inspect_job": {"job_id": JOB},
    "queue_stats": {},
    "diagnose_queue": {},
    "database_report": {},
    "wait_for_job": {"job_id": JOB, "timeout_seconds": 1},
    "list_backfills": {},
    "enqueue_job": {"name": "fulfil_order", "input": {**ORDER, "order_id": 2}},
    "retry_job": {"job_id": JOB},
    "cancel_job": {"job_id": JOB},
    "run_backfill": {"name": BACKFILL},
    "prune_history": {},
    "pause_queue": {"queue": "emails"},
    "resume_queue": {"job": "send_receipt"},
    "send_event": {"name": "payment.settled", "key": "43"},
    "retry_jobs": {"error_code": "DRIVER_UNAVAILABLE"},
    "cancel_jobs": {"name": "send_receipt"},
}
# One argument of each tool that takes any, given a value of the wrong JSON type.
NO_ARGUMENTS = {"database_report"}
WRONG_TYPE: dict[str, tuple[str, dict[str, Any]]] = {
    "describe_jobs": ("name", {"name": ["fulfil_order"]}),
    "list_jobs": ("limit", {"limit": "ten"}),
    "inspect_job": ("steps_limit", {"job_id": JOB, "steps_limit": "all"}),
    "queue_stats": ("queues", {"queues": "orders"}),
    "diagnose_queue": ("queue", {"queue": ["orders"]}),
    "wait_for_job": ("timeout_seconds", {"job_id": JOB, "timeout_seconds": "soon"}),
    "list_backfills": ("pending_only", {"pending_only": "yes"}),
    "enqueue_job": ("input", {"name": "fulfil_order", "input": "order 1"}),
    "retry_job": ("include_cancelled", {"job_id": JOB, "include_cancelled": "true"}),
    "cancel_job": ("job_id", {"job_id": 12345}),
    "run_backfill": ("force", {"name": BACKFILL, "force": "no"}),
    "prune_history": ("write", {"write": "no"}),
    "pause_queue": ("queue", {"queue": ["emails"]}),
    "resume_queue": ("job", {"job": 7}),
    "send_event": ("payload", {"name": "payment.settled", "key": "44", "payload": "paid"}),
    "retry_jobs": ("since_seconds", {"since_seconds": "an hour"}),
    "cancel_jobs": ("write", {"write": "yes"}),
}

INVALID: list[dict[str, Any]] = [
    {"id": "list_resources", "op": "listResources"},
    {"id": "list_templates", "op": "listResourceTemplates"},
    {"id": "list_prompts", "op": "listPrompts"},
    call("extra_urgency", "enqueue_job", {"name": "fulfil_order", "input": ORDER, "urgency": 5}),
    call(
        "extra_input_field",
        "enqueue_job",
        {"name": "fulfil_order", "input": {**ORDER, "order_id": 3, "gift": True}},
    ),
    call("cursor_garbage", "list_jobs", {"cursor": "garbage"}),
    call("wait_negative", "run_backfill", {"name": BACKFILL, "wait_seconds": -1}),
    call("unknown_tool", "no_such_tool", {}),
    prompt("unknown_prompt", "no_such_prompt", {}),
    prompt("prompt_missing_argument", "run_backfill_safely", {}),
    read("missing_run", f"jobs://runs/{UNKNOWN_JOB}"),
    read("missing_descriptor", "jobs://descriptors/no_such_job"),
    *(call(f"extra:{tool}", tool, {**args, BOGUS: 1}) for tool, args in MINIMAL.items()),
    *(call(f"type:{tool}", tool, args) for tool, (_, args) in WRONG_TYPE.items()),
]

SCENARIO = [*FLOW, *INVALID]


@pytest.fixture(scope="module", params=["stdio", "http"])
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ScenarioRun]:
    tools = toolchain()
    shop = make_shop(tmp_path_factory.mktemp(f"ts-{request.param}"))
    if request.param == "stdio":
        transport = ["--stdio", json.dumps(shop.serve_argv()), "--cwd", str(shop.root)]
        steps, stderr = run_scenario(tools, transport, SCENARIO, env=shop.env, cwd=shop.root)
        yield ScenarioRun(steps, stderr)
        return
    token = secrets.token_urlsafe(32)  # 43 characters: the server wants >= 32
    with http_server(shop, token) as url:
        env = {**shop.env, "MCP_JOBS_TOKEN": token}
        steps, _ = run_scenario(tools, ["--http", url], SCENARIO, env=env, cwd=shop.root)
    yield ScenarioRun(steps, (shop.root / "http-server.log").read_text())


def result(run: ScenarioRun, step_id: str) -> dict[str, Any]:
    """The step's CallToolResult (or resource / prompt result); fails if the client threw."""
    step = run.steps[step_id]
    assert step["ok"], f"{step_id}: the client threw: {step['error']}"
    found: dict[str, Any] = step["result"]
    return found


def answer(run: ScenarioRun, step_id: str) -> dict[str, Any]:
    """The tool's structured answer, which the client has already checked against its schema."""
    found = result(run, step_id)
    data: dict[str, Any] | None = found.get("structuredContent")
    assert data is not None, f"{step_id}: no structuredContent: {found}"
    assert bool(found.get("isError")) == (not data["ok"]), f"{step_id}: isError disagrees with ok"
    (text,) = found["content"]
    assert json.loads(text["text"]) == data, f"{step_id}: the text is not the structured answer"
    return data


def refused(run: ScenarioRun, step_id: str, *codes: str) -> dict[str, Any]:
    data = answer(run, step_id)
    assert result(run, step_id).get("isError") is True, f"{step_id}: answered {data}"
    assert data["ok"] is False and data["error"]["code"] in codes, f"{step_id}: answered {data}"
    assert data["error"]["retryable"] is False, data["error"]
    error: dict[str, Any] = data["error"]
    return error


def rpc_error(run: ScenarioRun, step_id: str) -> dict[str, Any]:
    step = run.steps[step_id]
    assert not step["ok"], f"{step_id}: answered without a JSON-RPC error: {step['result']}"
    error: dict[str, Any] = step["error"]
    assert not error["schemaViolation"], error
    return error


# --- the surface is covered ---------------------------------------------------------------------


def test_the_scenario_calls_every_tool_resource_and_prompt(run: ScenarioRun) -> None:
    listed = {tool["name"] for tool in result(run, "_listTools")["tools"]}
    called = {s["params"]["name"] for s in FLOW if s["op"] == "callTool"}
    assert called == listed == set(MINIMAL) == {*WRONG_TYPE, *NO_ARGUMENTS}
    # The static resources read (a template's URI is built from an earlier answer: a dict).
    uris = [s["params"]["uri"] for s in FLOW if s["op"] == "readResource"]
    static = {
        uri
        for uri in uris
        if uri == APP_URI or (isinstance(uri, str) and "/" not in uri[len("jobs://") :])
    }
    prompts = {s["params"]["name"] for s in FLOW if s["op"] == "getPrompt"}
    listed_resources = {r["uri"] for r in result(run, "list_resources")["resources"]}
    templates = {t["uriTemplate"] for t in result(run, "list_templates")["resourceTemplates"]}
    assert listed_resources == static
    assert templates == {"jobs://descriptors/{name}", "jobs://runs/{job_id}"}
    assert {p["name"] for p in result(run, "list_prompts")["prompts"]} == prompts


# --- valid arguments: ok, and every answer valid against its outputSchema -----------------------


def test_no_answer_breaks_its_output_schema(run: ScenarioRun) -> None:
    broken = {
        i: s["error"]["message"]
        for i, s in run.steps.items()
        if not s["ok"] and s["error"]["schemaViolation"]
    }
    assert not broken, broken


def test_every_tool_answers_valid_arguments_ok(run: ScenarioRun) -> None:
    failed = {}
    for step in FLOW:
        if step["op"] == "callTool" and step["id"] not in NOT_OK:
            data = answer(run, step["id"])
            if not data["ok"]:
                failed[step["id"]] = data["error"]
    assert not failed, failed


def test_the_valid_answers_carry_what_they_say(run: ScenarioRun) -> None:
    made = answer(run, "enqueue")
    assert made["state"] == "ready" and len(made["job_id"]) == 32
    assert answer(run, "enqueue_tenant")["tenant_id"] == "storefront-a"
    page1, page2 = answer(run, "list_page1"), answer(run, "list_page2")
    assert len(page1["jobs"]) == len(page2["jobs"]) == 1 and page1["next_cursor"]
    assert page1["jobs"][0]["id"] != page2["jobs"][0]["id"]
    assert answer(run, "inspect")["job"]["id"] == made["job_id"]
    assert answer(run, "wait")["settled"] is True
    assert answer(run, "backfill_dry")["plan"]["would_run"] is True
    assert answer(run, "backfill_write")["start"]["name"] == BACKFILL
    report = answer(run, "db_report")
    assert report["reachable"] is True
    assert any(line.startswith("schema") for line in report["lines"])


def test_every_resource_reads_as_json(run: ScenarioRun) -> None:
    for step in FLOW:
        if step["op"] == "readResource" and step["params"]["uri"] != APP_URI:
            (content,) = result(run, step["id"])["contents"]
            assert content["mimeType"] == "application/json", step["id"]
            json.loads(content["text"])
    run_record = json.loads(result(run, "res_run")["contents"][0]["text"])
    assert answer(run, "enqueue")["job_id"] in json.dumps(run_record)


def test_the_mcp_app_resource_reads_as_the_app_s_html(run: ScenarioRun) -> None:
    (content,) = result(run, "res_app")["contents"]
    assert content["mimeType"] == "text/html;profile=mcp-app"
    assert content["text"].startswith("<!doctype html>")


def test_every_prompt_renders(run: ScenarioRun) -> None:
    for step in FLOW:
        if step["op"] == "getPrompt":
            messages = result(run, step["id"])["messages"]
            assert messages and all(m["content"]["text"] for m in messages), step["id"]
    text = result(run, "prompt_backfill")["messages"][0]["content"]["text"]
    assert BACKFILL in text


# --- strict arguments ---------------------------------------------------------------------------


def test_an_undeclared_argument_is_refused_naming_it(run: ScenarioRun) -> None:
    error = refused(run, "extra_urgency", "TOOL_ARGUMENTS_INVALID")
    assert "urgency" in error["cause"]


def test_every_tool_refuses_an_undeclared_argument(run: ScenarioRun) -> None:
    for tool in MINIMAL:
        error = refused(run, f"extra:{tool}", "TOOL_ARGUMENTS_INVALID")
        assert BOGUS in error["cause"], (tool, error)


def test_every_tool_refuses_a_value_of_the_wrong_json_type(run: ScenarioRun) -> None:
    """Strings are not booleans or numbers, a string is not a list: nothing is coerced."""
    accepted = {}
    for tool, (argument, _) in WRONG_TYPE.items():
        step_id = f"type:{tool}"
        data = answer(run, step_id)
        if data["ok"] or data["error"]["code"] != "TOOL_ARGUMENTS_INVALID":
            accepted[step_id] = data.get("error") or "ok"
        else:
            assert argument in json.dumps(data["error"]), (tool, data["error"])
    assert not accepted, accepted


def test_a_string_is_not_a_boolean_and_nothing_is_written(run: ScenarioRun) -> None:
    refused(run, "write_yes", "TOOL_ARGUMENTS_INVALID")
    (backfill,) = answer(run, "yes_backfill")["backfills"]
    assert backfill.get("live_job_id") is None, backfill
    assert answer(run, "yes_jobs")["jobs"] == [], "the refused write started a pass"


def test_an_undeclared_input_field_is_refused_naming_it(run: ScenarioRun) -> None:
    error = refused(run, "extra_input_field", "JOB_INPUT_INVALID", "TOOL_ARGUMENTS_INVALID")
    assert "gift" in json.dumps(error)


def test_a_cursor_that_does_not_decode_is_cursor_invalid(run: ScenarioRun) -> None:
    refused(run, "cursor_garbage", "CURSOR_INVALID")


def test_a_negative_wait_is_refused(run: ScenarioRun) -> None:
    error = refused(run, "wait_negative", "TOOL_ARGUMENTS_INVALID", "INVALID_ARGUMENT")
    assert "wait_seconds" in json.dumps(error)


def test_a_second_cancel_is_ok_and_says_already_cancelled(run: ScenarioRun) -> None:
    first = answer(run, "cancel")
    assert first["ok"] and not first.get("already_cancelled")
    again = answer(run, "cancel_again")
    assert again["ok"] is True and again["already_cancelled"] is True, again


# --- protocol errors: -32602 with a clear message -----------------------------------------------


def test_an_unknown_tool_is_invalid_params(run: ScenarioRun) -> None:
    error = rpc_error(run, "unknown_tool")
    assert error["code"] == -32602 and "no_such_tool" in error["message"], error


def test_an_unknown_prompt_is_invalid_params(run: ScenarioRun) -> None:
    error = rpc_error(run, "unknown_prompt")
    assert error["code"] == -32602 and "no_such_prompt" in error["message"], error


def test_a_prompt_without_its_required_argument_is_invalid_params(run: ScenarioRun) -> None:
    error = rpc_error(run, "prompt_missing_argument")
    assert error["code"] == -32602 and "name" in error["message"], error


def test_a_missing_resource_is_invalid_params(run: ScenarioRun) -> None:
    assert rpc_error(run, "missing_run")["code"] == -32602
    assert rpc_error(run, "missing_descriptor")["code"] == -32602


def test_the_server_logs_no_traceback(run: ScenarioRun) -> None:
    lines = run.server_log.splitlines()
    # The log line before each traceback says which request raised it.
    raised = [lines[i - 1] for i, line in enumerate(lines) if line.startswith("Traceback") and i]
    assert not raised, raised
