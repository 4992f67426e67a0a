"""`jobs stats` as text shows each queue's cancelled jobs of the last hour beside the done ones,
as `queue_stats` (and `--json`) counts them: the table had no such column."""

from __future__ import annotations

import json

import anyio
import pytest

from engine import JobRegistry, connect
from engine.testing.kit.test_retention import settle
from mcp_jobs.cli import main
from tests.support.fix_lines import run_fix


def _seed(url: str) -> None:
    async def run() -> None:
        jobs = await connect(url, registry=JobRegistry())
        try:
            await settle(jobs.driver, "done", queue="emails")
            for _ in range(2):
                await settle(jobs.driver, "cancelled", queue="emails")
            await settle(jobs.driver, "cancelled", queue="orders")
        finally:
            await jobs.close()

    anyio.run(run)


def test_the_stats_table_shows_cancelled_in_the_last_hour(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(url)
    assert main(["jobs", "stats", "--database-url", url, "--json"]) == 0
    counted = {q["queue"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert (counted["emails"]["done"], counted["emails"]["cancelled"]) == (1, 2)
    assert main(["jobs", "stats", "--database-url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = lines[0].split("  ")
    headers = [h.strip() for h in headers if h.strip()]
    assert "CANCELLED 1H" in headers, lines[0]
    at = lines[0].index("CANCELLED 1H")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["emails"][at:].split()[0] == "2", lines
    assert rows["orders"][at:].split()[0] == "1", lines
    assert rows["ALL"][at:].split()[0] == "3", lines


def test_the_stats_table_shows_each_pause_and_the_line_that_lifts_it(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(url)
    assert main(["queues", "pause", "emails", "--database-url", url]) == 0
    assert main(["queues", "pause", "--job", "nightly", "--database-url", url]) == 0
    capsys.readouterr()
    assert main(["jobs", "stats", "--database-url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines[0].index("PAUSED")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["emails"][at:].startswith("since "), lines
    assert rows["orders"][at:].split()[0] == "-", lines
    resumes = [line.split("; to resume: ", 1) for line in lines if "; to resume: " in line]
    said = {said: fix for said, fix in resumes}
    assert set(said) == {"queue emails is paused", "job nightly is paused"}, lines
    for fix in said.values():
        run_fix(fix)
    assert main(["queues", "ls", "--database-url", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pauses"] == []
