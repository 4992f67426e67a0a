"""A small app with jobs in every state, a client on the dashboard, and a reader of its
`data-testid` marks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import httpx2
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Permanent, Retry, Worker, job
from mcp_jobs.config import Settings
from mcp_jobs.dashboard import Dashboard
from mcp_jobs.dashboard.auth import DashboardAuth, standalone_auth
from mcp_jobs.dashboard.routing import dashboard_routes_app
from schemas.stats import WorkerInfo

XSS = "<script>alert(1)</script>"


class Note(BaseModel):
    n: int
    note: str = ""


def declare(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"ok:{i.n}", queue="mail", registry=registry)
    async def ok(input: Note, ctx: JobContext) -> int:
        await ctx.step.run("prepare", lambda: input.n)
        return input.n

    @job(
        idempotency_key=lambda i: f"boom:{i.n}",
        queue="orders",
        retry=Retry(attempts=1),
        registry=registry,
    )
    async def boom(input: Note, ctx: JobContext) -> None:
        await ctx.step.run("reserve", lambda: "held")
        raise RuntimeError(f"upstream down {input.note}")

    @job(idempotency_key=lambda i: f"perm:{i.n}", queue="orders", registry=registry)
    async def perm(input: Note, ctx: JobContext) -> None:
        raise Permanent("bad order")

    @job(idempotency_key=lambda i: f"nap:{i.n}", queue="mail", registry=registry)
    async def nap(input: Note, ctx: JobContext) -> None:
        await ctx.step.run("first", lambda: 1)
        await ctx.step.sleep("rest", 3600)

    @job(idempotency_key=lambda i: f"slow:{i.n}", queue="slow", registry=registry)
    async def slow(input: Note, ctx: JobContext) -> None:
        return None


@dataclass
class Seeded:
    """The ids of the seeded jobs by the state each was left in."""

    ids: dict[str, list[str]] = field(default_factory=dict)

    def one(self, state: str) -> str:
        return self.ids[state][0]


async def seed(jobs: Jobs) -> Seeded:
    """Jobs in every state: done, dead (twice, one with <script> in its error), failed,
    suspended, delayed, cancelled, ready, running; and one live worker's presence."""
    seeded = Seeded()

    async def enqueue(name: str, n: int, note: str = "", **kw: Any) -> str:
        return (await jobs.enqueue(name, {"n": n, "note": note}, **kw)).id

    seeded.ids["done"] = [await enqueue("ok", 1), await enqueue("ok", 2, XSS)]
    seeded.ids["dead"] = [await enqueue("boom", 1, XSS), await enqueue("boom", 2)]
    seeded.ids["failed"] = [await enqueue("perm", 1)]
    seeded.ids["suspended"] = [await enqueue("nap", 1)]
    await Worker(jobs, concurrency=4, queues=["mail", "orders"]).run_until_idle()
    seeded.ids["delayed"] = [await enqueue("ok", 3, delay=600)]
    cancelled = await enqueue("ok", 4)
    await jobs.cancel(cancelled)
    seeded.ids["cancelled"] = [cancelled]
    seeded.ids["running"] = [await enqueue("slow", 1)]
    claimed = await jobs.driver.claim("w-test", 1, 60_000, ["slow"])  # left running
    assert [c.record.id for c in claimed] == seeded.ids["running"]
    seeded.ids["ready"] = [await enqueue("ok", 5), await enqueue("slow", 2)]
    clock = jobs.clock
    if isinstance(clock, ManualClock):  # the ready jobs have waited: oldest-ready age > 0
        clock.advance(1500)
    now = clock.now_ms()
    await jobs.driver.worker_seen(
        WorkerInfo(
            id="w-test",
            hostname="host<b>",
            pid=42,
            queues=["slow"],
            concurrency=2,
            started_at=now,
            last_seen_at=now,
        )
    )
    return seeded


def dashboard_for(
    jobs: Jobs, *, read_only: bool = False, settings: Settings | None = None
) -> Dashboard:
    return Dashboard(
        settings=settings or Settings(read_only=read_only), read_only=read_only, client=jobs
    )


@asynccontextmanager
async def browse(
    dash: Dashboard, auth: DashboardAuth | None = None, base: str = "http://127.0.0.1"
) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client on the dashboard's routes (no lifespan: the client is lent)."""
    app = dashboard_routes_app(dash, auth or standalone_auth(dash.settings))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url=base) as client:
        yield client


@dataclass
class Mark:
    tag: str
    attrs: dict[str, str]
    text: str = ""


class Marks(HTMLParser):
    """Every element carrying `data-testid` (or a `tr data-queue`), with its attributes and the
    text inside it."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.found: list[Mark] = []
        self._open: list[tuple[str, Mark | None]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        mark = Mark(tag, values) if "data-testid" in values or "data-queue" in values else None
        if mark is not None:
            self.found.append(mark)
        if tag not in ("input", "br", "meta", "polyline", "progress"):
            self._open.append((tag, mark))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            open_tag, _ = self._open.pop()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, mark in self._open:
            if mark is not None:
                mark.text += data

    def all(self, testid: str) -> list[Mark]:
        return [m for m in self.found if m.attrs.get("data-testid") == testid]

    def one(self, testid: str) -> Mark:
        (mark,) = self.all(testid)
        return mark

    def prefixed(self, start: str) -> dict[str, Mark]:
        return {
            m.attrs["data-testid"]: m
            for m in self.found
            if m.attrs.get("data-testid", "").startswith(start)
        }
