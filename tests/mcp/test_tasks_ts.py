"""MCP tasks with a real third-party client: the TypeScript SDK's `client.experimental.tasks`
(`callToolStream`, `getTask`, `getTaskResult`, `cancelTask`, `listTasks`) drives
`mcp-jobs serve --app examples.shop` over stdio and over HTTP with a bearer token, on the
2025-11-25 protocol the SDK speaks (tests/node/run_scenario.mjs).

A worker runs as a scenario step (`exec`), so "while working" and "after" are fixed points in
the scenario, not races. The SDK polls a streamed task itself at the task's pollInterval.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.mcp.tsclient_support import Shop, run_over

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

BACKFILL = "normalize_emails"
RECEIPT = {"order_id": 1, "email": "ana@shop.example"}
ORDER = {"order_id": 1, "sku": "tea-green", "quantity": 2}
JOB = {"$ref": "enqueue.result.structuredContent.job_id"}
WAIT_TASK = {"$ref": "start_wait.result.task.taskId"}
PARKED_TASK = {"$ref": "start_parked.result.task.taskId"}
# One worker pass over everything due, in its own process (the server only serves MCP).
WORKER = (
    "import asyncio, sys\n"
    "from engine import Worker\n"
    "from mcp_jobs.cli.commands import open_jobs\n"
    "from mcp_jobs.config import Settings\n"
    "async def main() -> None:\n"
    "    settings = Settings(database_url=sys.argv[1], apps=('examples.shop',))\n"
    "    async with open_jobs(settings) as jobs:\n"
    "        await Worker(jobs, queues='*', scheduler=False, prune=False).run_until_idle()\n"
    "asyncio.run(main())\n"
)


def call(step_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": step_id, "op": "callTool", "params": {"name": tool, "arguments": arguments}}


def task_op(step_id: str, op: str, task: dict[str, str]) -> dict[str, Any]:
    return {"id": step_id, "op": op, "params": {"taskId": task}}


def scenario(shop: Shop) -> list[dict[str, Any]]:
    worker = {"argv": [sys.executable, "-c", WORKER, shop.database_url]}
    return [
        call(
            "enqueue",
            "enqueue_job",
            {"name": "send_receipt", "input": RECEIPT, "tenant_id": "storefront-a"},
        ),
        {
            "id": "start_wait",
            "op": "startTask",
            "params": {"name": "wait_for_job", "arguments": {"job_id": JOB}},
        },
        task_op("get_working", "getTask", WAIT_TASK),
        {"id": "list", "op": "listTasks", "params": {}},
        {"id": "work", "op": "exec", "params": worker},
        task_op("get_done", "getTask", WAIT_TASK),
        task_op("result_wait", "getTaskResult", WAIT_TASK),
        call("bounded_wait", "wait_for_job", {"job_id": JOB, "timeout_seconds": 0}),
        # A job an hour away: its task waits, and is cancelled.
        call(
            "enqueue_parked",
            "enqueue_job",
            {"name": "fulfil_order", "input": {**ORDER, "order_id": 2}, "delay_seconds": 3600},
        ),
        {
            "id": "start_parked",
            "op": "startTask",
            "params": {
                "name": "wait_for_job",
                "arguments": {"job_id": {"$ref": "enqueue_parked.result.structuredContent.job_id"}},
            },
        },
        task_op("cancel", "cancelTask", PARKED_TASK),
        task_op("get_cancelled", "getTask", PARKED_TASK),
        task_op("cancel_again", "cancelTask", PARKED_TASK),
        # This client declares no elicitation: the write carries its dry run's confirm token.
        call("backfill_dry", "run_backfill", {"name": BACKFILL}),
        {
            "id": "backfill",
            "op": "streamTool",
            "params": {
                "name": "run_backfill",
                "arguments": {
                    "name": BACKFILL,
                    "write": True,
                    "confirm": {"$ref": "backfill_dry.result.structuredContent.confirm.token"},
                },
                "onWorking": worker["argv"],
            },
        },
        # A dry run is no task: the SDK's stream gets the server's refusal as its error.
        {
            "id": "dry_task",
            "op": "streamTool",
            "params": {"name": "run_backfill", "arguments": {"name": BACKFILL}},
        },
    ]


@pytest.fixture(scope="module", params=["stdio", "http"])
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp(f"ts-tasks-{request.param}")
    with run_over(request.param, root, scenario) as done:
        yield done


def ok(run: dict[str, Any], step_id: str) -> dict[str, Any]:
    step = run["by_id"][step_id]
    assert step["ok"], f"{step_id}: the client threw: {step['error']}"
    found: dict[str, Any] = step["result"]
    return found


def refused(run: dict[str, Any], step_id: str) -> dict[str, Any]:
    step = run["by_id"][step_id]
    assert not step["ok"], f"{step_id}: expected a refusal, got {step['result']}"
    error: dict[str, Any] = step["error"]
    return error


def output_schema(run: dict[str, Any], tool: str) -> dict[str, Any]:
    listed = {t["name"]: t for t in ok(run, "_listTools")["tools"]}
    schema: dict[str, Any] = listed[tool]["outputSchema"]
    return schema


def conforms(run: dict[str, Any], tool: str, envelope: dict[str, Any]) -> None:
    assert not list(Draft202012Validator(output_schema(run, tool)).iter_errors(envelope))


def test_the_sdk_sees_which_tools_take_tasks(run: dict[str, Any]) -> None:
    support = {
        t["name"]: t.get("execution", {}).get("taskSupport") for t in ok(run, "_listTools")["tools"]
    }
    assert support["wait_for_job"] == support["run_backfill"] == support["enqueue_job"]
    assert support["wait_for_job"] == "optional" and support["list_jobs"] is None


def test_wait_for_job_task_working_then_completed(run: dict[str, Any]) -> None:
    job_id = ok(run, "enqueue")["structuredContent"]["job_id"]
    created = ok(run, "start_wait")["task"]
    assert created["taskId"] == f"wait_for_job:{job_id}" and created["status"] == "working"
    working = ok(run, "get_working")
    assert working["status"] == "working"
    assert working["statusMessage"].startswith("ready (attempt 0 of")
    done = ok(run, "get_done")
    assert done["status"] == "completed" and done["statusMessage"].startswith("done (attempt 1 of")
    assert done["createdAt"] == working["createdAt"]


def test_task_result_is_the_bounded_calls_envelope(run: dict[str, Any]) -> None:
    result = ok(run, "result_wait")
    bounded = ok(run, "bounded_wait")["structuredContent"]
    envelope = result["structuredContent"]
    conforms(run, "wait_for_job", envelope)
    # Equal but for how long each call itself took.
    assert {**envelope, "waited_ms": 0} == {**bounded, "waited_ms": 0}
    assert envelope["settled"] is True and envelope["job"]["state"] == "done"
    assert envelope["output"]["sent"] is True
    assert result["isError"] is False
    task_id = ok(run, "start_wait")["task"]["taskId"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}


def test_list_tasks_shows_the_jobs(run: dict[str, Any]) -> None:
    listed = ok(run, "list")["tasks"]
    task_id = ok(run, "start_wait")["task"]["taskId"]
    assert task_id in [t["taskId"] for t in listed]
    assert all(t["status"] in ("working", "completed", "failed", "cancelled") for t in listed)


def test_cancel_task_cancels_the_waiting_job(run: dict[str, Any]) -> None:
    assert ok(run, "start_parked")["task"]["status"] == "working"
    assert ok(run, "cancel")["status"] == "cancelled"
    assert ok(run, "get_cancelled")["status"] == "cancelled"
    again = refused(run, "cancel_again")
    assert again["code"] == -32602 and "already cancelled" in again["message"]


def test_backfill_write_streams_to_a_valid_result(run: dict[str, Any]) -> None:
    messages = ok(run, "backfill")["messages"]
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result", messages
    assert "error" not in kinds  # the SDK checked the result against outputSchema (Ajv)
    statuses = [m["task"] for m in messages if m["type"] == "taskStatus"]
    assert statuses[0]["status"] == "working" and statuses[-1]["status"] == "completed"
    # The ledger's progress: the pass ran every row by the time it completed.
    total = messages[-1]["result"]["structuredContent"]["run"]["rows_total"]
    assert statuses[-1]["statusMessage"].startswith(f"completed: {total} of {total} rows")
    envelope = messages[-1]["result"]["structuredContent"]
    conforms(run, "run_backfill", envelope)
    assert envelope["mode"] == "write" and envelope["settled"] is True
    assert envelope["run"]["rows_processed"] == envelope["run"]["rows_total"] > 0
    job_id = envelope["start"]["job_id"]
    assert messages[0]["task"]["taskId"] == f"run_backfill:{job_id}"


def test_a_dry_run_is_no_task(run: dict[str, Any]) -> None:
    messages = ok(run, "dry_task")["messages"]
    assert [m["type"] for m in messages] == ["error"]
    assert messages[0]["error"]["code"] == -32602
    assert "write=true" in messages[0]["error"]["message"]


def test_the_client_is_told_task_status(run: dict[str, Any]) -> None:
    """`notifications/tasks/status`, caught by the SDK's TaskStatusNotificationSchema handler.
    The cancel is the server's own write, so its notification is out well before the backfill
    steps after it end the run."""
    parked = ok(run, "start_parked")["task"]["taskId"]
    told = [(n["taskId"], n["status"]) for n in run["taskStatus"]]
    assert (parked, "cancelled") in told, told
    started = {ok(run, s)["task"]["taskId"] for s in ("start_wait", "start_parked")}
    backfill = ok(run, "backfill")["messages"][0]["task"]["taskId"]
    assert {task for task, _ in told} <= started | {backfill}
    assert all(n["statusMessage"] and n["pollInterval"] for n in run["taskStatus"])
