"""Tasks under OAuth, over real streamable HTTP: a task-augmented call needs the scopes the plain
call needs, `tasks/cancel` needs `jobs:write` as cancel_job does, and a token's tenant claim pins
`tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` to its tenant's jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from engine import Worker
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.mcp.oauth_issuer import Issuer, issuer
from tests.mcp.test_oauth import _settings, running
from tests.mcp.test_tasks import LEGACY, TasksExtension, get, raw, settled_result, start_task

READER = "jobs:read"
WRITER = "jobs:read jobs:write"


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


@asynccontextmanager
async def session(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    client = Client(
        streamable_http_client(url, http_client=http), mode=mode, extensions=[TasksExtension()]
    )
    async with http, client:
        await client.list_tools()
        yield client


async def enqueue(client: Client, user_id: int, **extra: Any) -> str:
    made = await client.call_tool(
        "enqueue_job", {"name": "greet", "input": {"user_id": user_id}, **extra}
    )
    assert made.structured_content is not None, made
    job_id: str = made.structured_content["job_id"]
    return job_id


async def test_a_task_needs_the_plain_calls_scopes(idp: Issuer, mode: str) -> None:
    if mode != LEGACY:
        pytest.skip("2026-07-28: an enqueue is never a task there")
    async with running(_settings(idp)) as (listening, jobs):
        async with session(listening.url, idp.token(READER), mode) as reader:
            with pytest.raises(MCPError) as refused:
                await start_task(
                    reader, mode, "enqueue_job", {"name": "greet", "input": {"user_id": 1}}
                )
            assert refused.value.error.data["error"]["code"] == "SCOPE_MISSING"
        assert (await jobs.list()).jobs == []


async def test_a_backfill_write_task_needs_backfills_write(idp: Issuer, mode: str) -> None:
    settings = _settings(idp, confirm_writes=False)
    async with (
        running(settings) as (listening, _),
        session(listening.url, idp.token(WRITER), mode) as writer,
    ):
        with pytest.raises(MCPError) as refused:
            await start_task(writer, mode, "run_backfill", {"name": "nope", "write": True})
        error = refused.value.error.data["error"]
        assert error["code"] == "SCOPE_MISSING" and "backfills:write" in error["cause"]


async def test_cancel_needs_jobs_write(idp: Issuer, mode: str) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        async with session(listening.url, idp.token(WRITER), mode) as writer:
            job_id = await enqueue(writer, 2)
            task_id = await start_task(writer, mode, "wait_for_job", {"job_id": job_id})
        async with session(listening.url, idp.token(READER), mode) as reader:
            assert (await get(reader, task_id))["status"] == "working"
            with pytest.raises(MCPError) as refused:
                await raw(reader, "tasks/cancel", {"taskId": task_id})
            assert refused.value.error.data["code"] == "SCOPE_MISSING"
            assert (await jobs.get(job_id)).state == "ready"
            events = (await jobs.trace(job_id)).events
            assert any(e.kind == AUDIT_EVENT and e.actor == "mcp:cancel_job" for e in events)
        async with session(listening.url, idp.token(WRITER), mode) as writer:
            await raw(writer, "tasks/cancel", {"taskId": task_id})
        assert (await jobs.get(job_id)).state == "cancelled"


async def test_a_tenant_claim_pins_tasks(idp: Issuer, mode: str) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        async with session(listening.url, idp.token(WRITER, tenant="a"), mode) as mine:
            job_id = await enqueue(mine, 3)
            task_id = await start_task(mine, mode, "wait_for_job", {"job_id": job_id})
            await Worker(jobs).run_until_idle()
            # Enqueued after the worker ran, so still live: only the pin keeps it from us.
            theirs = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="b")
            their_task = f"wait_for_job:{theirs.id}"
            done = await settled_result(mine, mode, task_id)
            assert done["structuredContent"]["job"]["tenant_id"] == "a"
            methods = ["tasks/get", "tasks/cancel"] + (["tasks/result"] if mode == LEGACY else [])
            for method in methods:
                with pytest.raises(MCPError) as refused:
                    await raw(mine, method, {"taskId": their_task})
                assert refused.value.error.code == -32602, method
                assert "unknown task" in refused.value.error.message, method
            if mode == LEGACY:
                listed = [t["taskId"] for t in (await raw(mine, "tasks/list", {}))["tasks"]]
                assert task_id in listed and their_task not in listed
        assert (await jobs.get(theirs.id)).state == "ready"
