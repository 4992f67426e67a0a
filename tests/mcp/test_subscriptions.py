"""Subscriptions: a followed run, the stats and the descriptor list notify when they change, in
both protocol eras, driven by the engine's change signal (mcp_jobs/server/subscriptions.py).

Every wait is on the notification itself, bounded by `anyio.fail_after`. That a notification
was NOT sent is shown by ordering: one re-read tells its URIs in sorted order, so once the
`jobs://stats` notification arrives, a `jobs://runs/…` one from the same change would have too.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceListChangedNotification, ResourceUpdatedNotification

from engine import JobRegistry, Jobs, ManualClock, Worker, connect, rules
from engine.backfill import BackfillRegistry
from engine.drivers.base import AckWrite
from engine.testing.kit.test_descriptors import declare
from engine.testing.kit.test_paging import request
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.app import JobsServer
from mcp_jobs.server.followed import STATS, fingerprint
from mcp_jobs.server.state import AppState
from mcp_jobs.server.subscriptions import SubscriptionHub
from tests.support.presence import beat

WAIT_S = 10  # a bound on every wait, never a pause


class Inbox:
    """The change notifications one legacy session received, awaitable by URI."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.seen.append(str(message.params.uri))
        elif isinstance(message, ResourceListChangedNotification):
            self.seen.append("list_changed")
        else:
            return
        self._arrived.set()
        self._arrived = anyio.Event()

    async def next(self, what: str) -> list[str]:
        """Wait for `what`; answer what came before it."""
        with anyio.fail_after(WAIT_S):
            while what not in self.seen:
                await self._arrived.wait()
        return self.seen[: self.seen.index(what)]


def _hub(server: JobsServer) -> SubscriptionHub:
    assert server.subscriptions is not None
    return server.subscriptions


@asynccontextmanager
async def session(
    server: JobsServer, mode: str, inbox: Inbox | None = None
) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, message_handler=inbox) as client:
        yield client


async def subscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():  # resources/subscribe is the 2025-11-25 road: on purpose
        warnings.simplefilter("ignore")
        await client.subscribe_resource(uri)


async def unsubscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.unsubscribe_resource(uri)


async def _greet(jobs: Jobs, user_id: int = 1) -> str:
    return (await jobs.enqueue("greet", {"user_id": user_id})).id


async def test_capabilities_declare_subscribe_and_list_changed(
    jobs: Jobs, app: JobRegistry, mode: str
) -> None:
    async with session(build_server(Settings(), jobs), mode) as client:
        resources = client.server_capabilities.resources
        assert resources is not None and resources.subscribe and resources.list_changed


async def test_a_worker_running_the_job_notifies_its_run_and_the_stats_legacy(
    jobs: Jobs, app: JobRegistry
) -> None:
    server = build_server(Settings(), jobs)
    inbox = Inbox()
    job_id = await _greet(jobs)
    run = f"jobs://runs/{job_id}"
    async with session(server, "legacy", inbox) as client:
        await subscribe(client, run)
        await subscribe(client, "jobs://stats")
        assert _hub(server).follows == 2 and _hub(server).listening
        await Worker(jobs).run_until_idle()
        await inbox.next(run)
        await inbox.next("jobs://stats")

        # Unsubscribed: the next change tells the stats, and nothing about the run.
        await unsubscribe(client, run)
        inbox.seen.clear()
        await _greet(jobs, 2)
        assert run not in await inbox.next("jobs://stats")
        assert run not in inbox.seen
    # The session ended: nothing it followed is kept, and the listener has stopped.
    assert _hub(server).follows == 0 and not _hub(server).listening


async def test_a_worker_running_the_job_notifies_a_listen_stream(
    jobs: Jobs, app: JobRegistry
) -> None:
    server = build_server(Settings(), jobs)
    job_id = await _greet(jobs)
    run = f"jobs://runs/{job_id}"
    async with session(server, "auto") as client:
        async with client.listen(resource_subscriptions=[run, "jobs://stats"]) as stream:
            assert _hub(server).follows == 2
            await Worker(jobs).run_until_idle()
            told: set[str] = set()
            with anyio.fail_after(WAIT_S):
                async for event in stream:
                    told.add(str(getattr(event, "uri", "")))
                    if {run, "jobs://stats"} <= told:
                        break
        # The stream ended: its follows went with it.
        with anyio.fail_after(WAIT_S):
            while _hub(server).follows:
                await anyio.lowlevel.checkpoint()
    assert not _hub(server).listening


async def test_published_descriptors_change_the_resource_list(
    jobs: Jobs, clock: ManualClock, mode: str
) -> None:
    server = build_server(Settings(), jobs, backfills=BackfillRegistry())
    app = JobRegistry()
    declare(app)
    worker = Worker(Jobs(jobs.driver, registry=app, clock=clock), apps=["shop.jobs"])
    if mode == "legacy":
        inbox = Inbox()
        async with session(server, mode, inbox) as client:
            await client.list_resources()  # a session that listed resources hears of changes
            with anyio.fail_after(WAIT_S):
                while not _hub(server).listening:
                    await anyio.lowlevel.checkpoint()
            await _baseline(server)
            await worker.publish_descriptors()
            await inbox.next("list_changed")
        return
    async with (
        session(server, mode) as client,
        client.listen(resources_list_changed=True) as stream,
    ):
        await _baseline(server)
        await worker.publish_descriptors()
        with anyio.fail_after(WAIT_S):
            event = await stream.__anext__()
        assert type(event).__name__ == "ResourcesListChanged"


async def _looked(server: JobsServer) -> None:
    """The listener's first re-read is done: a later one needs a new change signal."""
    with anyio.fail_after(WAIT_S):
        while _hub(server).rounds < 1:
            await anyio.lowlevel.checkpoint()


async def _baseline(server: JobsServer) -> None:
    """The listener's first reading of the descriptor list (the change is told against it)."""
    hub = _hub(server)
    with anyio.fail_after(WAIT_S):
        while hub._last_list is None:
            await anyio.lowlevel.checkpoint()


async def test_bad_subscriptions_are_typed_errors(jobs: Jobs, app: JobRegistry, mode: str) -> None:
    server = build_server(Settings(), jobs)
    _hub(server).per_session = 1
    job_id = await _greet(jobs)

    async def refused(*uris: str) -> dict[str, Any]:
        with pytest.raises(MCPError) as caught:
            if mode == "legacy":
                for uri in uris:
                    await subscribe(client, uri)
            else:
                async with client.listen(resource_subscriptions=list(uris)):
                    pass
        data: dict[str, Any] = caught.value.error.data
        return data

    async with session(server, mode) as client:
        assert (await refused("jobs://nope"))["code"] == "SUBSCRIPTION_UNSUPPORTED"
        assert (await refused("jobs://runs/missing"))["code"] == "JOB_NOT_FOUND"
        limit = await refused(f"jobs://runs/{job_id}", "jobs://stats")
        assert limit["code"] == "SUBSCRIPTION_LIMIT" and limit["fix"]
        _hub(server).per_session, _hub(server).total = 5, 0
        assert (await refused("jobs://stats"))["code"] == "SUBSCRIPTION_LIMIT"
    assert _hub(server).follows == 0


async def test_a_refused_subscription_s_fix_runs_as_given(
    jobs: Jobs, app: JobRegistry, database_url: str
) -> None:
    """The fix reads this server's database (a bare `mcp-jobs jobs ls` reads the default file
    of whatever directory it runs in), and a run's id given in capitals is subscribed to as is."""
    server = build_server(Settings(database_url=database_url), jobs)
    job_id = await _greet(jobs)
    async with session(server, "legacy") as client:
        with pytest.raises(MCPError) as caught:
            await subscribe(client, "jobs://runs/" + "0" * 32)
        fix = caught.value.error.data["fix"]
        if database_url.startswith("memory:"):  # a shell's memory:// is a new, empty store
            assert fix == "list_jobs {}", fix
        else:
            assert "mcp-jobs jobs ls --json --database-url " in fix, fix
        with pytest.raises(MCPError) as caught:
            await subscribe(client, f"jobs://runs/{job_id.upper()}")
        fix = caught.value.error.data["fix"]
        assert fix == f'resources/subscribe {{"uri": "jobs://runs/{job_id}"}}'
        await subscribe(client, f"jobs://runs/{job_id}")


@pytest.mark.drivers(
    "postgres", "sqlite", "redis", "nats", reason="another connection's writes reach the server"
)
async def test_another_process_settling_the_job_notifies(
    jobs: Jobs, app: JobRegistry, database_url: str, clock: ManualClock, mode: str
) -> None:
    """The worker's own driver (another pool, another listener): on PostgreSQL the settle's
    NOTIFY, on SQLite the file's feed, on Redis the settle script's PUBLISH (tests/redis runs
    this module) is what reaches the server's listener."""
    server = build_server(Settings(), jobs)
    job_id = await _greet(jobs)
    run = f"jobs://runs/{job_id}"
    elsewhere = await connect(database_url, clock=clock, registry=app)
    driver: Any = jobs.driver
    if driver.kind == "postgres":  # up before the worker runs: only its NOTIFY can tell
        assert await driver.start_listening_for_changes()
    try:
        if mode == "legacy":
            inbox = Inbox()
            async with session(server, mode, inbox) as client:
                await subscribe(client, run)
                await _looked(server)
                await beat(elsewhere)
                await Worker(elsewhere).run_until_idle()
                await inbox.next(run)
            return
        async with (
            session(server, mode) as client,
            client.listen(resource_subscriptions=[run]) as stream,
        ):
            await _looked(server)
            await beat(elsewhere)
            await Worker(elsewhere).run_until_idle()
            with anyio.fail_after(WAIT_S):
                event = await stream.__anext__()
            assert getattr(event, "uri", None) == run
    finally:
        await elsewhere.close()


async def test_the_stats_reading_ignores_what_only_the_clock_moves(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting job's age and a busy queue's done window grow while nothing is written: the
    stats' reading does not change with them, so no notification is sent for the clock."""
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 1)
    driver = jobs.driver
    now = clock.now_ms()
    await driver.enqueue([request(n, run_at=now) for n in (1, 2)])
    held = await driver.claim("w", 2, 600_000)
    for c in held:
        clock.advance(10)
        await driver.ack_many([AckWrite(c.record.id, c.token, None)])
    await driver.enqueue([request(3, run_at=clock.now_ms())])
    state = AppState(jobs=jobs, settings=Settings(database_url="memory://"))
    (before,) = await jobs.stats()
    reading = await fingerprint(state, STATS)
    clock.advance(1_000)
    (after,) = await jobs.stats()
    assert after.settled_window_ms == before.settled_window_ms + 1_000 < rules.RECENT_SETTLED_MS
    assert after.oldest_ready_ms == before.oldest_ready_ms + 1_000
    assert await fingerprint(state, STATS) == reading
    await driver.enqueue([request(4, run_at=clock.now_ms())])  # a write: a new reading
    assert await fingerprint(state, STATS) != reading
