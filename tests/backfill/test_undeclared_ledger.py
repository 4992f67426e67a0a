"""The ledger of a backfill no longer declared (a one-off deleted from the code after it ran) is
still the record of what ran: `list_backfills {"name": ...}` and `backfill NAME --runs` page it.
A name with no ledger row here stays BACKFILL_UNKNOWN."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from engine import Jobs, connect
from engine.backfill import BackfillRegistry
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.operations import list_backfills
from mcp_jobs.operations.scope import Scope
from tests.backfill.support import declare, ledger_run


def _scope(jobs: Jobs, registry: BackfillRegistry) -> Scope:
    return Scope(jobs, Settings(), "list_backfills", "test", backfill_registry=registry)


async def test_the_runs_of_a_backfill_no_longer_declared_are_listed(
    jobs: Jobs, backfill_registry: BackfillRegistry
) -> None:
    declare(backfill_registry, name="still_declared")
    for n in range(3):
        await jobs.driver.backfill_save(ledger_run(n))
    await jobs.driver.backfill_save(ledger_run(9, environment="production"))
    scope = _scope(jobs, backfill_registry)

    page = await list_backfills(scope, name="retired_sweep", runs_limit=2)

    assert page.ok and page.backfills == []
    assert page.runs is not None and [r.run_id for r in page.runs] == ["run0002", "run0001"]
    assert page.runs_cursor is not None
    rest = await list_backfills(scope, name="retired_sweep", runs_cursor=page.runs_cursor)
    assert rest.runs is not None and [r.run_id for r in rest.runs] == ["run0000"]
    assert rest.runs_cursor is None


async def test_a_name_with_no_ledger_row_here_is_still_unknown(
    jobs: Jobs, backfill_registry: BackfillRegistry
) -> None:
    declare(backfill_registry, name="still_declared")
    await jobs.driver.backfill_save(ledger_run(0, environment="production"))
    scope = _scope(jobs, backfill_registry)

    for name in ("retired_sweep", "never_declared"):
        with pytest.raises(Exception) as raised:
            await list_backfills(scope, name=name)
        assert getattr(raised.value, "code", None) == "BACKFILL_UNKNOWN"


def test_the_cli_pages_the_runs_of_a_backfill_no_longer_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_JOBS_ENV", raising=False)
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"

    async def write() -> None:
        writer = await connect(url)
        try:
            await writer.driver.backfill_save(ledger_run(0, "cli_retired_sweep"))
        finally:
            await writer.close()

    anyio.run(write)

    args = ["backfill", "cli_retired_sweep", "--runs", "--json", "--database-url", url]
    code = main(args)
    listed = json.loads(capsys.readouterr().out)
    assert code == 0, listed
    assert [r["run_id"] for r in listed["runs"]] == ["run0000"]

    code = main(["backfill", "cli_never_declared", "--runs", "--json", "--database-url", url])
    refused = json.loads(capsys.readouterr().out)
    assert code == 1 and refused["error"]["code"] == "BACKFILL_UNKNOWN"
