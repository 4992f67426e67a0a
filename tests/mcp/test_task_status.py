"""`notifications/tasks/status` (2025-11-25 tasks utility): a session hears its tasks change
status, driven by the subscription hub's change listener (mcp_jobs/server/tasks.py
`StatusWatcher`), and its watches end with the task or the session.

Every wait is on the notification itself, bounded by `anyio.fail_after`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.types import TaskStatusNotificationParams

from engine import Jobs, Worker
from mcp_jobs.config import Settings
from mcp_jobs.server.app import JobsServer, build_server
from mcp_jobs.server.tasks import EXTENSION_ID, STATUS_METHOD, StatusWatcher, TaskMiddleware
from tests.mcp.test_tasks import LEGACY, raw, start_task

WAIT_S = 10  # a bound on every wait, never a pause


class StatusInbox(ClientExtension):
    """Declares tasks and collects the status notifications the session receives."""

    identifier = EXTENSION_ID

    def __init__(self) -> None:
        self.heard: list[tuple[str, str, str | None]] = []  # (taskId, status, statusMessage)
        self._arrived = anyio.Event()

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return (
            NotificationBinding(
                method=STATUS_METHOD, params_type=TaskStatusNotificationParams, handler=self._got
            ),
        )

    async def _got(self, params: TaskStatusNotificationParams) -> None:
        self.heard.append((params.task_id, params.status, params.status_message))
        self._arrived.set()
        self._arrived = anyio.Event()

    async def until(self, task_id: str, status: str) -> list[tuple[str, str, str | None]]:
        """Wait for `task_id` to be told `status`; answer what this task was told up to then."""
        with anyio.fail_after(WAIT_S):
            while not any(h[0] == task_id and h[1] == status for h in self.heard):
                await self._arrived.wait()
        return [h for h in self.heard if h[0] == task_id]


def watcher_of(server: JobsServer) -> StatusWatcher:
    found = [m for m in server._lowlevel_server.middleware if isinstance(m, TaskMiddleware)]
    assert found and found[0].watcher is not None
    return found[0].watcher


@asynccontextmanager
async def session(server: JobsServer, inbox: StatusInbox) -> AsyncIterator[Client]:
    async with Client(server, mode=LEGACY, extensions=[inbox]) as client:
        yield client


async def enqueue(client: Client, user_id: int) -> str:
    answer = await client.call_tool("enqueue_job", {"name": "greet", "input": {"user_id": user_id}})
    job_id: str = answer.structured_content["job_id"]  # type: ignore[index]
    return job_id


async def test_a_session_hears_its_task_complete(jobs: Jobs, app: Any) -> None:
    server = build_server(Settings(), jobs)
    inbox = StatusInbox()
    async with session(server, inbox) as client:
        job_id = await enqueue(client, 7)
        task_id = await start_task(client, LEGACY, "wait_for_job", {"job_id": job_id})
        assert watcher_of(server).watched == 1
        await Worker(jobs).run_until_idle()
        heard = await inbox.until(task_id, "completed")
        assert heard[-1][2] is not None and heard[-1][2].startswith("done")
        # The settled task's last word is said once; its watch is over.
        assert [h[1] for h in heard].count("completed") == 1
        assert watcher_of(server).watched == 0
        assert (await raw(client, "tasks/get", {"taskId": task_id}))["status"] == "completed"


async def test_a_cancelled_task_is_told(jobs: Jobs, app: Any) -> None:
    server = build_server(Settings(), jobs)
    inbox = StatusInbox()
    async with session(server, inbox) as client:
        job_id = await enqueue(client, 8)
        task_id = await start_task(client, LEGACY, "wait_for_job", {"job_id": job_id})
        await raw(client, "tasks/cancel", {"taskId": task_id})
        assert (await inbox.until(task_id, "cancelled"))[-1][1] == "cancelled"
        assert watcher_of(server).watched == 0


async def test_the_watch_ends_with_the_session(jobs: Jobs, app: Any) -> None:
    server = build_server(Settings(), jobs)
    watcher = watcher_of(server)
    async with session(server, StatusInbox()) as client:
        job_id = await enqueue(client, 9)
        await start_task(client, LEGACY, "wait_for_job", {"job_id": job_id})
        assert watcher.watched == 1 and watcher.wants()
    assert watcher.watched == 0 and not watcher.wants()


async def test_tasks_beyond_the_cap_are_not_watched(jobs: Jobs, app: Any) -> None:
    server = build_server(Settings(), jobs)
    watcher = watcher_of(server)
    watcher.per_session = 1
    inbox = StatusInbox()
    async with session(server, inbox) as client:
        first = await start_task(
            client, LEGACY, "wait_for_job", {"job_id": await enqueue(client, 1)}
        )
        second = await start_task(
            client, LEGACY, "wait_for_job", {"job_id": await enqueue(client, 2)}
        )
        assert watcher.watched == 1
        await Worker(jobs).run_until_idle()
        await inbox.until(first, "completed")
        # Both settled in one run; the first's notification came, the second's never will.
        assert all(h[0] != second for h in inbox.heard)
        assert (await raw(client, "tasks/get", {"taskId": second}))["status"] == "completed"
