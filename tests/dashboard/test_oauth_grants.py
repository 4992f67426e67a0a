"""The dashboard beside `/mcp` on an OAuth server holds a token to what the MCP tools hold it to:
its tenant claim pins every page and action, `jobs:read` is needed for anything, a write needs
the tool's write scope, and a pause or resume (every tenant's work) is refused to a pinned token.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx2
import pytest

from engine import Jobs, Worker
from mcp_jobs.config import OAuthSettings, Settings
from mcp_jobs.dashboard import mounted_beside
from mcp_jobs.dashboard.auth import COOKIE
from mcp_jobs.server import build_server
from mcp_jobs.server.audit import AUDIT_EVENT
from mcp_jobs.server.http_serve import http_app
from mcp_jobs.server.oauth import discover
from tests.dashboard.support import Marks, Seeded
from tests.mcp.oauth_issuer import AUDIENCE, Issuer, issuer

pytestmark = pytest.mark.drivers("memory", reason="the token's grants do not depend on the driver")

READER = "jobs:read"
WRITER = "jobs:read jobs:write"
SECRET = "private@bravo.io"


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


@asynccontextmanager
async def mounted(jobs: Jobs, idp: Issuer) -> AsyncIterator[httpx2.AsyncClient]:
    oauth = OAuthSettings(issuer=idp.url, resource_url=AUDIENCE, audience=AUDIENCE)
    settings = await discover(Settings(port=0, oauth=oauth))
    server = build_server(settings, jobs, http=True)
    app = http_app(server, settings, mounted_beside(settings, jobs))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        yield http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def csrf_of(page: httpx2.Response) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert found is not None, page.text
    return found.group(1)


async def tenants_jobs(jobs: Jobs) -> dict[str, str]:
    """A dead job of tenant acme, and a delayed job of tenant bravo whose input is private."""
    acme = (await jobs.enqueue("boom", {"n": 90}, tenant_id="acme")).id
    bravo = (await jobs.enqueue("ok", {"n": 91, "note": SECRET}, tenant_id="bravo", delay=600)).id
    await Worker(jobs, concurrency=1, queues=["orders"]).run_until_idle()
    assert (await jobs.get(acme)).state == "dead"
    return {"acme": acme, "bravo": bravo}


async def test_a_tenant_claim_pins_every_page(jobs: Jobs, seeded: Seeded, idp: Issuer) -> None:
    ids = await tenants_jobs(jobs)
    acme = bearer(idp.token(READER, tenant="acme"))
    async with mounted(jobs, idp) as http:
        # Another tenant's job is not there, as inspect_job's JOB_NOT_FOUND says.
        theirs = await http.get(f"/dashboard/jobs/{ids['bravo']}", headers=acme)
        assert theirs.status_code == 404
        assert Marks(theirs.text).one("error-code").text == "JOB_NOT_FOUND"
        assert SECRET not in theirs.text
        listed = Marks((await http.get("/dashboard/jobs", headers=acme)).text)
        assert [r.attrs["data-job-id"] for r in listed.all("job-row")] == [ids["acme"]]
        asked = await http.get("/dashboard/jobs", params={"tenant": "bravo"}, headers=acme)
        assert asked.status_code == 400
        assert Marks(asked.text).one("error-code").text == "TENANT_PINNED"
        assert ids["bravo"] not in asked.text
        overview = Marks((await http.get("/dashboard/", headers=acme)).text)
        assert overview.one("queue:orders:dead").attrs["data-value"] == "1"  # acme's only
        assert not overview.prefixed("queue:mail:")  # bravo's and the untenanted jobs' queue
        # The sampler reads every tenant: its series are not a pinned token's to see.
        assert not overview.prefixed("spark:")
        dead = Marks((await http.get("/dashboard/dead", headers=acme)).text)
        assert dead.one("dead-total").attrs["data-value"] == "1"
        # The cookie the `?token=` step sets carries the same token, and so the same pin.
        entered = await http.get("/dashboard/", params={"token": idp.token(READER, tenant="acme")})
        assert entered.status_code == 303
        http.cookies.set(COOKIE, idp.token(READER, tenant="acme"))
        assert (await http.get(f"/dashboard/jobs/{ids['bravo']}")).status_code == 404
        http.cookies.clear()
        # A token without a tenant claim reads every tenant's, as it does through /mcp.
        every = bearer(idp.token(READER))
        page = await http.get(f"/dashboard/jobs/{ids['bravo']}", headers=every)
        assert page.status_code == 200 and SECRET in page.text
        overview = Marks((await http.get("/dashboard/", headers=every)).text)
        assert overview.one("queue:orders:dead").attrs["data-value"] == "3"
        assert overview.prefixed("spark:orders:")


async def test_the_workers_page_is_not_a_pinned_tokens(
    jobs: Jobs, seeded: Seeded, idp: Issuer
) -> None:
    """Worker hosts and process ids are the operator's machines, serving every tenant: a pinned
    token is refused them (TENANT_SCOPE_EXCEEDED) and offered no link to them."""
    async with mounted(jobs, idp) as http:
        pinned = bearer(idp.token(READER, tenant="acme"))
        refused = await http.get("/dashboard/workers", headers=pinned)
        overview = await http.get("/dashboard/", headers=pinned)
        every = bearer(idp.token(READER))
        shown = await http.get("/dashboard/workers", headers=every)
        unpinned_overview = await http.get("/dashboard/", headers=every)
    assert refused.status_code == 403
    assert Marks(refused.text).one("error-code").text == "TENANT_SCOPE_EXCEEDED"
    assert "host&lt;b&gt;" not in refused.text and "w-test" not in refused.text
    assert 'href="/dashboard/workers"' not in overview.text
    assert shown.status_code == 200 and "host&lt;b&gt;" in shown.text
    assert 'href="/dashboard/workers"' in unpinned_overview.text


async def test_a_token_without_jobs_read_is_refused(
    jobs: Jobs, seeded: Seeded, idp: Issuer
) -> None:
    ids = await tenants_jobs(jobs)
    async with mounted(jobs, idp) as http:
        for scopes in ("", "jobs:write", "admin"):
            for route in ("/dashboard/", "/dashboard/jobs", f"/dashboard/jobs/{ids['bravo']}"):
                answer = await http.get(route, headers=bearer(idp.token(scopes, tenant="acme")))
                assert answer.status_code == 403, (scopes, route)
                challenge = answer.headers["www-authenticate"]
                assert 'error="insufficient_scope"' in challenge
                assert 'scope="jobs:read"' in challenge
                assert Marks(answer.text).one("error-code").text == "SCOPE_MISSING"
                assert SECRET not in answer.text and ids["bravo"] not in answer.text


async def test_an_action_needs_the_tools_write_scope(
    jobs: Jobs, seeded: Seeded, idp: Issuer
) -> None:
    ids = await tenants_jobs(jobs)
    dead = ids["acme"]
    reader = bearer(idp.token(READER, tenant="acme"))
    writer = bearer(idp.token(WRITER, tenant="acme"))
    async with mounted(jobs, idp) as http:
        # No link to what the token cannot do; its form is refused as the tool is.
        page = Marks((await http.get(f"/dashboard/jobs/{dead}", headers=reader)).text)
        assert not page.all("retry")
        form = await http.get(f"/dashboard/jobs/{dead}/retry", headers=reader)
        assert form.status_code == 403
        assert Marks(form.text).one("error-code").text == "SCOPE_MISSING"
        # A form posted with a good CSRF token (another's) is refused, and audited as the tool.
        csrf = csrf_of(await http.get(f"/dashboard/jobs/{dead}/retry", headers=writer))
        refused = await http.post(
            f"/dashboard/jobs/{dead}/retry", headers=reader, data={"csrf": csrf}
        )
        assert refused.status_code == 403
        assert Marks(refused.text).one("error-code").text == "SCOPE_MISSING"
        assert (await jobs.get(dead)).state == "dead"
        # Another tenant's job cannot be acted on even with the scope: not there.
        theirs = f"/dashboard/jobs/{ids['bravo']}/cancel"
        csrf = csrf_of(await http.get(theirs, headers=writer))
        gone = await http.post(theirs, headers=writer, data={"csrf": csrf})
        assert Marks(gone.text).one("error-code").text == "JOB_NOT_FOUND"
        assert (await jobs.get(ids["bravo"])).state == "delayed"
        # With jobs:write the link is there and the retry runs.
        page = Marks((await http.get(f"/dashboard/jobs/{dead}", headers=writer)).text)
        assert page.one("retry").attrs["href"] == f"/dashboard/jobs/{dead}/retry"
        csrf = csrf_of(await http.get(f"/dashboard/jobs/{dead}/retry", headers=writer))
        done = await http.post(f"/dashboard/jobs/{dead}/retry", headers=writer, data={"csrf": csrf})
        assert done.status_code == 303
    assert (await jobs.get(dead)).state == "ready"
    audited = [
        (e.actor, e.data["tool"], e.data["ok"], e.data.get("error_code"))
        for e in (await jobs.trace(dead)).events
        if e.kind == AUDIT_EVENT and e.data is not None
    ]
    assert audited == [
        ("dashboard:retry_job", "retry_job", False, "SCOPE_MISSING"),
        ("dashboard:retry_job", "retry_job", True, None),
    ]


async def test_pause_and_resume_are_refused_to_a_tenant_pinned_token(
    jobs: Jobs, seeded: Seeded, idp: Issuer
) -> None:
    pinned = bearer(idp.token(WRITER, tenant="acme"))
    every = bearer(idp.token(WRITER))
    async with mounted(jobs, idp) as http:
        await tenants_jobs(jobs)
        overview = Marks((await http.get("/dashboard/", headers=pinned)).text)
        assert overview.one("queue:orders:dead")  # the row is there, without its controls
        assert not overview.prefixed("pause:") and not overview.prefixed("resume:")
        route = "/dashboard/queues/pause?queue=orders"
        csrf = csrf_of(await http.get(route, headers=every))
        refused = await http.post(route, headers=pinned, data={"csrf": csrf})
        assert refused.status_code == 403
        assert Marks(refused.text).one("error-code").text == "TENANT_SCOPE_EXCEEDED"
        assert await jobs.pauses() == []
        # A token over every tenant pauses, as pause_queue does for it.
        assert Marks((await http.get("/dashboard/", headers=every)).text).one("pause:orders")
        assert (await http.post(route, headers=every, data={"csrf": csrf})).status_code == 303
    assert [p.name for p in await jobs.pauses()] == ["orders"]
