"""`mcp-jobs backfill NAME --runs` as text: the older-runs line keeps the page size it was given,
a backfill this process does not declare says so (its ledger is read back all the same), and a
run made under another definition than the one declared now is marked."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import examples.shop
from engine import connect
from schemas.backfill import BackfillRun
from tests.backfill.support import ledger_run
from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli, cli_json, shop
from tests.support.fix_lines import command_words

__all__ = ["shop"]  # the fixture, used by name below


def _save(url: str, runs: list[BackfillRun]) -> None:
    async def write() -> None:
        writer = await connect(url)
        try:
            for run in runs:
                await writer.driver.backfill_save(run)
        finally:
            await writer.close()

    anyio.run(write)


def _older(out: str) -> list[str]:
    (more,) = [line for line in out.splitlines() if line.startswith("older runs: ")]
    return command_words(more.removeprefix("older runs: "))[1:]


def test_the_older_runs_line_keeps_the_page_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MCP_JOBS_ENV", "MCP_JOBS_APP", "MCP_JOBS_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    _save(url, [ledger_run(n, "paged_sweep") for n in range(7)])
    code, out, _ = cli(
        capsys, "backfill", "paged_sweep", "--runs", "--runs-limit", "2", "--database-url", url
    )
    assert code == 0, out
    code, second = cli_json(capsys, *_older(out))
    assert code == 0 and [r["run_id"] for r in second["runs"]] == ["run0004", "run0003"]
    # The default page size needs no flag.
    code, out, _ = cli(capsys, "backfill", "paged_sweep", "--runs", "--database-url", url)
    assert code == 0 and "older runs" not in out


def test_a_backfill_not_declared_here_says_so_over_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MCP_JOBS_ENV", "MCP_JOBS_APP", "MCP_JOBS_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    _save(url, [ledger_run(0, "gone_sweep")])
    code, out, _ = cli(capsys, "backfill", "gone_sweep", "--runs", "--database-url", url)
    assert code == 0, out
    assert 'backfill "gone_sweep" is not declared here' in out
    assert "run0000" in out and "NAME" not in out  # no empty table of declared backfills


def test_a_run_under_another_definition_is_marked(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert examples.shop.seed_customers(5) >= 0
    db = ("--database-url", migrated(shop), "--app", APP)
    code, listed = cli_json(capsys, "backfill", *db)
    assert code == 0
    (declared,) = [b for b in listed["backfills"] if b["name"] == "normalize_emails"]
    _save(shop, [ledger_run(0, "normalize_emails", checksum="0" * 16)])
    _save(shop, [ledger_run(1, "normalize_emails", checksum=declared["checksum"])])
    code, out, _ = cli(capsys, "backfill", "normalize_emails", "--runs", *db)
    assert code == 0, out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("run")}
    assert "another definition" in rows["run0000"] and "another" not in rows["run0001"]
    assert f"declared now: checksum {declared['checksum']}" in out
