"""MCP tasks over durable jobs, spoken as raw JSON-RPC through the in-process client (the Python
SDK has no client-side tasks API): 2025-11-25's tasks utility ("legacy") and the 2026-07-28 tasks
extension ("auto")."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp.client import Client
from mcp.client.extension import ClientExtension
from mcp.shared.exceptions import MCPError

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry
from mcp_jobs.config import Settings
from mcp_jobs.server.app import build_server
from mcp_jobs.server.tasks import EXTENSION_ID
from tests.backfill.support import Customers

LEGACY = "legacy"


class TasksExtension(ClientExtension):
    """Declares the 2026-07-28 tasks extension; results are read raw, so it claims nothing."""

    identifier = EXTENSION_ID


@asynccontextmanager
async def session(
    jobs: Jobs,
    mode: str,
    settings: Settings | None = None,
    backfills: BackfillRegistry | None = None,
) -> AsyncIterator[Client]:
    server = build_server(settings or Settings(), jobs, backfills=backfills)
    async with Client(server, mode=mode, extensions=[TasksExtension()]) as client:
        await client.list_tools()
        yield client


async def raw(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request as the session frames it (per-request `_meta` on 2026-07-28)."""
    s: Any = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    s._stamp(data, opts)
    answer: dict[str, Any] = await s._dispatcher.send_raw_request(method, data["params"], opts)
    return answer


async def start_task(client: Client, mode: str, tool: str, arguments: dict[str, Any]) -> str:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if mode == LEGACY:
        params["task"] = {"ttl": 60000}
    created = await raw(client, "tools/call", params)
    task = created["task"] if mode == LEGACY else created
    if mode != LEGACY:
        assert created["resultType"] == "task"
    assert (
        task["status"] in ("working", "completed")
        and task["pollInterval" if mode == LEGACY else "pollIntervalMs"]
    )
    task_id: str = task["taskId"]
    return task_id


async def get(client: Client, task_id: str) -> dict[str, Any]:
    return await raw(client, "tasks/get", {"taskId": task_id})


async def settled_result(client: Client, mode: str, task_id: str) -> dict[str, Any]:
    """The tool's CallToolResult once the job settled: tasks/result (2025-11-25) or the
    completed task's `result` (2026-07-28)."""
    if mode == LEGACY:
        return await raw(client, "tasks/result", {"taskId": task_id})
    task = await get(client, task_id)
    assert task["status"] == "completed", task
    result: dict[str, Any] = task["result"]
    return result


def conforms(client_schema: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    envelope: dict[str, Any] = result["structuredContent"]
    assert not list(Draft202012Validator(client_schema).iter_errors(envelope))
    return envelope


async def schema_of(client: Client, tool: str) -> dict[str, Any]:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    schema = listed[tool].output_schema
    assert schema is not None
    return schema


async def test_the_server_advertises_tasks(jobs: Jobs, app: Any, mode: str) -> None:
    async with session(jobs, mode) as client:
        if mode == LEGACY:
            assert client.server_capabilities.tasks is not None
            listed = await raw(client, "tools/list", {})
            support = {
                t["name"]: t.get("execution", {}).get("taskSupport") for t in listed["tools"]
            }
            assert support["wait_for_job"] == support["run_backfill"] == "optional"
            assert support["enqueue_job"] == "optional" and support["list_jobs"] is None
        else:
            extensions = client.server_capabilities.extensions or {}
            assert EXTENSION_ID in extensions


async def test_wait_for_job_is_a_task_backed_by_the_job(jobs: Jobs, app: Any, mode: str) -> None:
    async with session(jobs, mode) as client:
        job_id = (
            await client.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": 7}})
        ).structured_content["job_id"]  # type: ignore[index]
        task_id = await start_task(client, mode, "wait_for_job", {"job_id": job_id})
        assert task_id == f"wait_for_job:{job_id}"
        working = await get(client, task_id)
        assert working["status"] == "working" and working["statusMessage"].startswith("ready (")
        await Worker(jobs).run_until_idle()
        result = await settled_result(client, mode, task_id)
        envelope = conforms(await schema_of(client, "wait_for_job"), result)
        assert envelope["settled"] is True and envelope["output"] == {"greeted": 7}
        assert result["isError"] is False


async def test_a_task_augmented_enqueue_answers_the_settled_job(
    jobs: Jobs, app: Any, mode: str
) -> None:
    if mode != LEGACY:
        pytest.skip("2026-07-28: the client cannot ask; an enqueue stays immediate there")
    async with session(jobs, mode) as client:
        task_id = await start_task(
            client, mode, "enqueue_job", {"name": "greet", "input": {"user_id": 8}}
        )
        await Worker(jobs).run_until_idle()
        result = await settled_result(client, mode, task_id)
        envelope = conforms(await schema_of(client, "enqueue_job"), result)
        assert envelope["state"] == "done" and task_id == f"enqueue_job:{envelope['job_id']}"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        listed = await raw(client, "tasks/list", {})
        assert f"wait_for_job:{envelope['job_id']}" in [t["taskId"] for t in listed["tasks"]]


async def test_a_backfill_write_is_a_task(
    jobs: Jobs, app: Any, mode: str, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    # Confirmation before writes is its own feature (server.confirm); off here.
    unconfirmed = Settings(confirm_writes=False)
    async with session(jobs, mode, unconfirmed, backfill_registry) as client:
        task_id = await start_task(
            client, mode, "run_backfill", {"name": "normalize_emails", "write": True}
        )
        await Worker(jobs).run_until_idle()
        assert customers.remaining() == 0
        result = await settled_result(client, mode, task_id)
        envelope = conforms(await schema_of(client, "run_backfill"), result)
        assert envelope["settled"] is True and envelope["run"]["rows_processed"] == 25
        # The ledger's progress, read by tasks/get.
        message = (await get(client, task_id))["statusMessage"]
        assert message.startswith("completed: 25 of 25 rows processed; job done"), message


async def test_cancel_cancels_the_job_and_is_audited(jobs: Jobs, app: Any, mode: str) -> None:
    async with session(jobs, mode) as client:
        job_id = (
            await client.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": 9}})
        ).structured_content["job_id"]  # type: ignore[index]
        task_id = await start_task(client, mode, "wait_for_job", {"job_id": job_id})
        await raw(client, "tasks/cancel", {"taskId": task_id})
        assert (await jobs.get(job_id)).state == "cancelled"
        assert (await get(client, task_id))["status"] == "cancelled"
        events = (await jobs.trace(job_id)).events
        assert any(e.kind == "cancelled" and e.actor == "mcp:cancel_job" for e in events)
        with pytest.raises(MCPError):
            await raw(client, "tasks/cancel", {"taskId": task_id})


async def test_a_new_server_on_the_same_database_answers_the_task(
    jobs: Jobs, app: Any, mode: str
) -> None:
    async with session(jobs, mode) as first:
        job_id = (
            await first.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": 10}})
        ).structured_content["job_id"]  # type: ignore[index]
        task_id = await start_task(first, mode, "wait_for_job", {"job_id": job_id})
    await Worker(jobs).run_until_idle()
    async with session(jobs, mode) as second:
        assert (await get(second, task_id))["status"] == "completed"
        envelope = (await settled_result(second, mode, task_id))["structuredContent"]
        assert envelope["output"] == {"greeted": 10}


async def test_a_pinned_server_sees_no_other_tenants_task(jobs: Jobs, app: Any, mode: str) -> None:
    enqueued = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    other = f"wait_for_job:{enqueued.id}"
    async with session(jobs, mode, Settings(tenant="globex")) as client:
        with pytest.raises(MCPError) as refused:
            await get(client, other)
        assert refused.value.error.code == -32602
    async with session(jobs, mode, Settings(tenant="acme")) as client:
        assert (await get(client, other))["status"] == "working"


async def test_no_job_no_task(jobs: Jobs, app: Any, mode: str) -> None:
    async with session(jobs, mode) as client:
        with pytest.raises(MCPError) as refused:
            await start_task(client, mode, "wait_for_job", {"job_id": "nope"})
        assert refused.value.error.data["error"]["code"] == "JOB_NOT_FOUND"
        with pytest.raises(MCPError):
            await get(client, "list_jobs:x")


async def test_plain_calls_stay_bounded(jobs: Jobs, app: Any, mode: str) -> None:
    """A client that does not ask for a task gets today's bounded answer."""
    server = build_server(Settings(), jobs)
    async with Client(server, mode=mode) as client:
        job_id = (
            await client.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": 11}})
        ).structured_content["job_id"]  # type: ignore[index]
        waited = await client.call_tool("wait_for_job", {"job_id": job_id, "timeout_seconds": 0})
        assert (
            waited.structured_content is not None and waited.structured_content["settled"] is False
        )


@pytest.mark.parametrize("wait", [math.nan, math.inf])
async def test_a_task_with_a_wait_that_is_no_number_is_refused(
    jobs: Jobs, app: Any, mode: str, wait: float
) -> None:
    # H3: a task set the wait to 0 before the checks, so `timeout_seconds: NaN` made a task.
    async with session(jobs, mode) as client:
        job_id = (
            await client.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": 11}})
        ).structured_content["job_id"]  # type: ignore[index]
        with pytest.raises(MCPError) as refused:
            await start_task(
                client, mode, "wait_for_job", {"job_id": job_id, "timeout_seconds": wait}
            )
        error = refused.value.error.data["error"]
        assert error["code"] == "TOOL_ARGUMENTS_INVALID" and error["retryable"] is False, error
        assert error.get("next_call") is None and "<timeout_seconds>" in error["fix"], error
