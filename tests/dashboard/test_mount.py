"""`serve --transport http` serves the dashboard at /dashboard/ behind the server's token (by
header, or `?token=` then its cookie), read-only when the server is; /mcp is unchanged."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import httpx2
import pytest

from engine import JobRegistry, Jobs, connect
from mcp_jobs.config import Settings
from mcp_jobs.dashboard import mounted_beside
from mcp_jobs.dashboard.auth import COOKIE
from mcp_jobs.server import build_server
from mcp_jobs.server.http_serve import Listening, http_app, serve_http
from tests.dashboard.support import Marks, Seeded, declare, seed

pytestmark = pytest.mark.drivers("memory", reason="the mount does not depend on the driver")

TOKEN = "k" * 40
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def mounted(jobs: Jobs, **overrides: object) -> AsyncIterator[httpx2.AsyncClient]:
    settings = Settings(**{"port": 0, "token": TOKEN, **overrides})  # type: ignore[arg-type]
    server = build_server(settings, jobs, http=True)
    app = http_app(server, settings, mounted_beside(settings, jobs))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        yield http


async def test_the_dashboard_is_behind_the_servers_token(jobs: Jobs, seeded: Seeded) -> None:
    async with mounted(jobs) as http:
        assert (await http.get("/dashboard/")).status_code == 401  # loopback too, as /mcp
        assert (
            await http.get("/dashboard/", headers={"Authorization": "Bearer no"})
        ).status_code == 401
        assert (await http.get("/dashboard/jobs", headers=BEARER)).status_code == 200
        entered = await http.get("/dashboard/", params={"token": TOKEN})
        assert entered.status_code == 303 and entered.headers["location"] == "/dashboard/"
        assert "Path=/dashboard/" in entered.headers["set-cookie"]
        http.cookies.set(COOKIE, TOKEN)
        page = await http.get("/dashboard/")
        assert page.status_code == 200
        assert Marks(page.text).one("queue:orders:dead").attrs["data-value"] == "2"
        job = Marks((await http.get(f"/dashboard/jobs/{seeded.one('dead')}")).text)
        assert job.one("retry").attrs["href"] == f"/dashboard/jobs/{seeded.one('dead')}/retry"
        http.cookies.clear()
        assert (await http.post("/mcp", json={})).status_code == 401  # the MCP endpoint as before


async def test_a_read_only_server_mounts_a_read_only_dashboard(jobs: Jobs, seeded: Seeded) -> None:
    dead = seeded.one("dead")
    async with mounted(jobs, read_only=True) as http:
        page = Marks((await http.get(f"/dashboard/jobs/{dead}", headers=BEARER)).text)
        assert not page.all("retry")
        refused = await http.post(
            f"/dashboard/jobs/{dead}/retry", headers=BEARER, data={"csrf": "x"}
        )
        assert refused.status_code == 403
        # The refusal's own links stay under the mount, as every page's do.
        for answer in (
            refused,
            await http.get("/dashboard/queues/pause?queue=mail", headers=BEARER),
            await http.get("/dashboard/jobs"),  # no token: 401
        ):
            hrefs = re.findall(r'href="([^"]*)"', answer.text)
            assert hrefs and all(h.startswith("/dashboard/") for h in hrefs), hrefs
            assert answer.headers["x-frame-options"] == "DENY"
    assert (await jobs.get(dead)).state == "dead"


async def test_the_served_app_runs_the_dashboard_with_the_server() -> None:
    registry = JobRegistry()
    declare(registry)
    jobs = await connect("memory://", registry=registry)
    settings = Settings(port=0, token=TOKEN)
    try:
        await seed(jobs)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                server = build_server(settings, jobs, http=True)
                start = partial(serve_http, beside=mounted_beside(settings, jobs))
                listening: Listening = await tg.start(start, server, settings)
                try:
                    base = listening.url.removesuffix("/mcp")
                    async with httpx2.AsyncClient(headers=BEARER) as http:
                        page = await http.get(f"{base}/dashboard/")
                finally:
                    listening.stop()
    finally:
        await jobs.close()
    assert page.status_code == 200
    # The sampler took its first reading when the server started.
    assert Marks(page.text).one("spark:orders:depth").attrs["data-points"] == "1"


async def test_a_refused_token_has_the_same_code_and_title_on_the_dashboard_as_on_mcp(
    jobs: Jobs,
) -> None:
    async with mounted(jobs) as http:
        mcp = (await http.post("/mcp", json={}, headers={"Authorization": "Bearer no"})).json()
        page = await http.get("/dashboard/", headers={"Authorization": "Bearer no"})
    data = mcp["error"]["data"]
    shown = Marks(page.text).one("error-code")
    assert shown.text == data["code"] == "HTTP_TOKEN_REFUSED"
    assert f"</b> {data['title']}<div>" in page.text, page.text
