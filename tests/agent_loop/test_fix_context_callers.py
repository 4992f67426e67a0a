"""Whom a fix line is written for (`FixContext.of`): an OAuth token holder is not handed the
operator's connection details, and a caller pinned to one tenant is offered no call to a tool
that spans every tenant."""

from __future__ import annotations

from pathlib import Path

from engine.environment import EnvironmentUse
from mcp_jobs.config import OAuthSettings, Settings
from mcp_jobs.fix_context import SPANS_TENANTS, Face, FixContext
from mcp_jobs.operations.models import Finding
from schemas.errors import NextCall

URL = "postgresql://opsuser:hunter2@db.internal.example:6543/prod_jobs"
OAUTH = OAuthSettings(
    issuer="https://auth.example.com", resource_url="https://jobs.example/mcp", audience="x"
)
APP = "callers_shop_app"
APP_DB = EnvironmentUse(name="CALLERS_SHOP_DB", default="data/shop.db", path=True)


def of(tmp_path: Path, face: Face, **settings: object) -> FixContext:
    """A context whose app imports only through the inherited PYTHONPATH (`lib`)."""
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / f"{APP}.py").write_text("")
    return FixContext.of(
        Settings(database_url=URL, apps=(APP,), environment="staging", **settings),  # type: ignore[arg-type]
        face=face,
        cwd=tmp_path,
        environ={"PYTHONPATH": "lib", "PATH": "/nowhere"},
        declared=[APP_DB],
    )


def test_a_token_holder_gets_the_line_without_the_operators_details(tmp_path: Path) -> None:
    remote = of(tmp_path, "mcp", oauth=OAUTH, tenant="acme")
    line = remote.qualify("mcp-jobs jobs ls --json")
    assert line == (
        'MCP_JOBS_ENV=staging mcp-jobs jobs ls --json --database-url "$MCP_JOBS_DATABASE_URL" '
        f"--app {APP} --tenant acme"
    )
    assert remote.qualify("python -c pass") == "MCP_JOBS_ENV=staging python -c pass"


def test_the_operator_keeps_every_detail(tmp_path: Path) -> None:
    """The same server's CLI, and a server without OAuth, write the whole context in."""
    for ctx in (of(tmp_path, "cli", oauth=OAUTH), of(tmp_path, "mcp")):
        line = ctx.qualify("mcp-jobs jobs ls --json")
        assert "db.internal.example:6543/prod_jobs" in line and "hunter2" not in line
        assert f"CALLERS_SHOP_DB={tmp_path}/data/shop.db" in line
        assert f"PYTHONPATH={tmp_path}/lib" in line


def test_a_memory_store_is_still_known_as_private(tmp_path: Path) -> None:
    remote = FixContext.of(Settings(database_url="memory://", oauth=OAUTH), cwd=tmp_path)
    assert remote.private_store


def test_a_pinned_caller_is_offered_no_call_spanning_every_tenant(tmp_path: Path) -> None:
    pending = Finding(
        code="BACKFILL_PENDING",
        severity="info",
        cause="pending",
        fix="mcp-jobs backfill normalize_emails",
        next_call=NextCall(tool="run_backfill", arguments={"name": "normalize_emails"}),
    )
    for pinned in (
        of(tmp_path, "mcp", tenant="acme"),
        of(tmp_path, "mcp", tenant="acme", oauth=OAUTH),
    ):
        assert pinned.unserved >= SPANS_TENANTS
        assert pinned.qualify_all(pending).next_call is None
    assert of(tmp_path, "mcp").qualify_all(pending).next_call == pending.next_call


def test_a_page_served_to_a_token_holder_is_written_without_them(tmp_path: Path) -> None:
    """A face whose fixes are commands (a dashboard page) says its reader holds a token."""
    page = FixContext.of(
        Settings(database_url=URL, oauth=OAUTH), face="cli", cwd=tmp_path, remote=True
    )
    line = page.qualify("mcp-jobs jobs ls --json")
    assert line == 'mcp-jobs jobs ls --json --database-url "$MCP_JOBS_DATABASE_URL"'
