"""What an OAuth token holder is answered, over real streamable HTTP: a third party is not handed
the operator's connection details, is offered no call it would be refused (a tool of a scope it
lacks, a tool spanning every tenant when its token pins one, a confirm token it cannot act
with), and its refusals say it is the token that pins it or lacks the scope."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import JobRegistry, Jobs, connect
from engine.backfill import BackfillRegistry
from engine.environment import forget_environment, uses_environment
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.http_serve import Listening, serve_http
from mcp_jobs.server.oauth import discover
from tests.backfill.support import declare as declare_backfill
from tests.mcp.oauth_issuer import Issuer, issuer
from tests.mcp.support import Caller, Person, declare_app
from tests.mcp.test_oauth import _settings

READER = "jobs:read"
WRITER = "jobs:read jobs:write"
EVERY_SCOPE = "jobs:read jobs:write backfills:write admin"
# The operator's connection details: a database URL with its user, host and name, and a path
# the app declares (`uses_environment`), as examples.shop declares SHOP_DB.
OPERATOR_URL = "postgresql://opsuser@db.internal.example:6543/prod_jobs"
APP_ENV = "OAUTH_CALLERS_SHOP_DB"
APP_PATH = "/srv/operator-only/shop.db"
WRITE_ONLY_TOOLS = {"enqueue_job", "retry_job", "cancel_job", "pause_queue", "resume_queue"}


@pytest.fixture
def idp() -> Iterator[Issuer]:
    with issuer() as made:
        yield made


@pytest.fixture
def app_path() -> Iterator[str]:
    uses_environment(APP_ENV, default=APP_PATH, path=True)
    try:
        yield APP_PATH
    finally:
        forget_environment(APP_ENV)


@pytest.fixture
def pending_backfill() -> BackfillRegistry:
    registry = BackfillRegistry()
    declare_backfill(registry)
    return registry


@asynccontextmanager
async def running(
    settings: Settings, backfills: BackfillRegistry | None = None
) -> AsyncIterator[tuple[Listening, Jobs]]:
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    settings = await discover(settings)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                server = build_server(settings, jobs, http=True, backfills=backfills)
                listening: Listening = await tg.start(serve_http, server, settings)
                try:
                    yield listening, jobs
                finally:
                    listening.stop()
    finally:
        await jobs.close()


@asynccontextmanager
async def session(
    url: str, token: str, mode: str = "legacy", person: Person | None = None
) -> AsyncIterator[Caller]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode, elicitation_callback=person) as client:
        caller = Caller(client, person=person)
        await caller.load()
        yield caller


def _text(answer: Any) -> str:
    return json.dumps(answer)


def _withheld(answer: Any) -> None:
    """Nothing of the operator's database, paths or install in `answer`."""
    shown = _text(answer)
    for secret in ("opsuser", "db.internal.example", "6543", "prod_jobs", APP_ENV, APP_PATH):
        assert secret not in shown, (secret, shown)
    assert str(Path(sys.executable).parent) not in shown, shown
    assert "PYTHONPATH" not in shown, shown


# --- #5: connection details ---------------------------------------------------------------------


async def test_a_token_holder_is_not_handed_the_operators_connection_details(
    idp: Issuer, app_path: str
) -> None:
    settings = _settings(idp, database_url=OPERATOR_URL)
    async with running(settings) as (listening, jobs):
        theirs = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="bravo")
        async with session(listening.url, idp.token(EVERY_SCOPE, tenant="acme")) as mcp:
            made = await mcp.ok("enqueue_job", {"name": "receipt", "input": {"order_id": 2}})
            (notice,) = made["notices"]
            assert notice["code"] == "NO_LIVE_WORKERS"
            missing = await mcp.fails("inspect_job", {"job_id": theirs.id}, "JOB_NOT_FOUND")
            across = await mcp.fails("database_report", {}, "TENANT_SCOPE_EXCEEDED")
        for answer in (made, missing, across):
            _withheld(answer)
        # Still the operator's line, the database named by the variable the operator sets.
        for fix in (notice["fix"], missing["fix"], across["fix"]):
            assert fix.startswith("mcp-jobs ") and '--database-url "$MCP_JOBS_DATABASE_URL"' in fix
        assert missing["next_call"] == {"tool": "list_jobs", "arguments": {"tenant_id": "acme"}}


async def test_the_operators_own_stdio_answers_keep_their_context(
    jobs: Jobs, app: JobRegistry, app_path: str
) -> None:
    """The same server without OAuth (the operator's own agent) still writes every detail in:
    the rule is the token holder's, not every pinned caller's."""
    from tests.mcp.support import serve

    async with serve(jobs, "legacy", Settings(database_url=OPERATOR_URL, tenant="acme")) as mcp:
        made = await mcp.ok("enqueue_job", {"name": "receipt", "input": {"order_id": 2}})
    fix = made["notices"][0]["fix"]
    assert OPERATOR_URL in fix and f"{APP_ENV}={APP_PATH}" in fix


# --- #12: tools/list ----------------------------------------------------------------------------


async def test_a_read_only_token_lists_no_tool_every_call_of_which_writes(idp: Issuer) -> None:
    async with running(_settings(idp)) as (listening, _):
        async with session(listening.url, idp.token(READER)) as reader:
            listed = set(reader.schemas)
        async with session(listening.url, idp.token(WRITER)) as writer:
            every = set(writer.schemas)
    assert not (WRITE_ONLY_TOOLS | {"send_event"}) & listed
    assert WRITE_ONLY_TOOLS | {"send_event"} <= every
    # A tool with a read (a dry run, a plan) stays listed.
    assert {"run_backfill", "prune_history", "retry_jobs", "cancel_jobs"} <= listed


# --- #13: a bulk plan for a token that may not act on it ----------------------------------------


async def test_a_plan_the_token_cannot_act_on_offers_no_confirm_token(idp: Issuer) -> None:
    async with running(_settings(idp)) as (listening, jobs):
        await jobs.enqueue("greet", {"user_id": 1})
        async with session(listening.url, idp.token(READER)) as reader:
            plan = await reader.ok("cancel_jobs", {"queue": "mail"})
            retry_plan = await reader.ok("retry_jobs", {"queue": "mail"})
        async with session(listening.url, idp.token(WRITER)) as writer:
            offered = await writer.ok("cancel_jobs", {"queue": "mail"})
        assert [j.state for j in (await jobs.list()).jobs] == ["ready"]
    for answer in (plan, retry_plan):
        assert answer["mode"] == "plan" and "confirm" not in answer
        (notice,) = answer["notices"]
        assert notice["code"] == "SCOPE_MISSING" and "'jobs:write'" in notice["fix"]
    assert plan["plan"]["total"] == 1
    assert offered["confirm"]["next_call"]["tool"] == "cancel_jobs"
    assert "notices" not in offered


async def test_a_backfill_or_prune_dry_run_offers_a_read_token_no_confirm_token(
    idp: Issuer, pending_backfill: BackfillRegistry
) -> None:
    """The dry runs of run_backfill and prune_history are reads; their token is for a write the
    token may not make: none is offered, and a notice says which scope is missing."""
    async with running(_settings(idp), pending_backfill) as (listening, _):
        async with session(listening.url, idp.token(READER)) as reader:
            backfill = await reader.ok("run_backfill", {"name": "normalize_emails"})
            prune = await reader.ok("prune_history", {})
        async with session(listening.url, idp.token(EVERY_SCOPE)) as admin:
            offered = await admin.ok("prune_history", {})
    for answer, scope in ((backfill, "backfills:write"), (prune, "admin")):
        assert answer["mode"] == "dry_run" and "confirm" not in answer, answer
        (notice,) = answer["notices"]
        assert notice["code"] == "SCOPE_MISSING" and f"'{scope}'" in notice["fix"], notice
    assert offered["confirm"]["next_call"]["tool"] == "prune_history"
    assert "notices" not in offered


async def test_a_write_the_token_cannot_make_asks_nobody(idp: Issuer) -> None:
    person = Person()
    async with running(_settings(idp)) as (listening, jobs):
        await jobs.enqueue("greet", {"user_id": 1})
        async with session(listening.url, idp.token(READER), person=person) as reader:
            await reader.fails("cancel_jobs", {"queue": "mail", "write": True}, "SCOPE_MISSING")
        assert person.asked == []
        assert [j.state for j in (await jobs.list()).jobs] == ["ready"]


# --- #14: no call a tenant-pinned token is refused ----------------------------------------------


async def test_a_pinned_token_is_offered_no_call_spanning_every_tenant(
    idp: Issuer, pending_backfill: BackfillRegistry
) -> None:
    async with running(_settings(idp), pending_backfill) as (listening, _):
        async with session(listening.url, idp.token(EVERY_SCOPE, tenant="acme")) as pinned:
            diagnosed = await pinned.ok("diagnose_queue", {})
            await pinned.fails(
                "run_backfill", {"name": "normalize_emails"}, "TENANT_SCOPE_EXCEEDED"
            )
        async with session(listening.url, idp.token(EVERY_SCOPE)) as everyone:
            unpinned = await everyone.ok("diagnose_queue", {})
    (pending,) = [f for f in diagnosed["findings"] if f["code"] == "BACKFILL_PENDING"]
    assert "next_call" not in pending
    (offered,) = [f for f in unpinned["findings"] if f["code"] == "BACKFILL_PENDING"]
    assert offered["next_call"] == {
        "tool": "run_backfill",
        "arguments": {"name": "normalize_emails"},
    }


# --- #15: it is the token ----------------------------------------------------------------------


async def test_refusals_say_it_is_the_token_that_pins_or_lacks_the_scope(idp: Issuer) -> None:
    token = idp.token(READER, tenant="acme")
    async with running(_settings(idp)) as (listening, _), session(listening.url, token) as pinned:
        other = await pinned.fails("list_jobs", {"tenant_id": "bravo"}, "TENANT_PINNED")
        across = await pinned.fails("database_report", {}, "TENANT_SCOPE_EXCEEDED")
        scope = await pinned.fails("prune_history", {"write": True}, "SCOPE_MISSING")
    for refused in (other, across):
        assert (
            'this access token is pinned to tenant "acme" by its "tenant" claim'
            in (refused["cause"])
        )
        assert "this server" not in refused["cause"]
    assert "ask them" in across["cause"]
    assert other["next_call"] == {"tool": "list_jobs", "arguments": {"tenant_id": "acme"}}
    # The operator's act: the grant, where, for which client, and the scope to ask for.
    assert scope["fix"] == (
        f"grant client 'test-client' the scope 'admin' at the authorization server {idp.url}, "
        "then request a token with scope 'admin jobs:read' and reconnect with it"
    )
