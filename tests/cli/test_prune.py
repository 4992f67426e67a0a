"""`mcp-jobs db prune`: a dry run counts per state and queue, a write prunes, `--older-than` and
`--state` narrow it, `--tenant` prunes one tenant's rows, and a bad duration exits 1 with a fix.
Audit events of no job go by the audit retention."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest

from engine import JobRegistry, ManualClock, Worker, connect
from engine.retention import Retention
from engine.testing.kit.test_descriptors import declare
from engine.testing.kit.test_retention import settle
from mcp_jobs.cli import main
from tests.support.fix_lines import command_words, run_fix


def seed(url: str) -> None:
    """Settled rows that finished an hour ago (by the system clock the CLI reads)."""

    async def run() -> None:
        import time

        clock = ManualClock(time.time_ns() // 1_000_000 - 3_600_000)
        jobs = await connect(url, clock=clock, registry=JobRegistry())
        try:
            await settle(jobs.driver, "done", queue="mail")
            await settle(jobs.driver, "done", queue="mail", tenant="acme")
            await settle(jobs.driver, "dead", queue="orders")
        finally:
            await jobs.close()

    anyio.run(run)


def prune(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["db", "prune", "--database-url", url, *argv, "--json"])
    envelope: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, envelope


def test_a_dry_run_counts_and_a_write_prunes(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed(url)
    code, plan = prune(capsys, url, "--dry-run")
    assert code == 0 and plan["by_state"] == {"done": 0, "failed": 0, "dead": 0, "cancelled": 0}

    code, plan = prune(capsys, url, "--dry-run", "--older-than", "30m")
    assert code == 0 and plan["mode"] == "dry_run"
    assert plan["by_queue"] == [
        {"state": "dead", "queue": "orders", "rows": 1},
        {"state": "done", "queue": "mail", "rows": 2},
    ]
    code, done = prune(capsys, url, "--older-than", "30m", "--state", "done", "--tenant", "acme")
    assert code == 0 and done["by_state"]["done"] == 1 and done["tenant_id"] == "acme"
    code, rest = prune(capsys, url, "--older-than", "30m")
    assert code == 0 and rest["by_state"] == {"done": 1, "failed": 0, "dead": 1, "cancelled": 0}
    assert rest["more"] is False
    code, after = prune(capsys, url, "--dry-run", "--older-than", "0d")
    assert sum(after["by_state"].values()) == 0


def test_text_output_and_a_bad_duration(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed(url)
    assert main(["db", "prune", "--database-url", url, "--dry-run", "--older-than", "1m"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would prune 3 settled job(s): done 2, failed 0, dead 1, cancelled 0")
    assert "orders" in out
    code, bad = prune(capsys, url, "--older-than", "a while")
    assert code == 1 and bad["error"]["code"] == "INVALID_ARGUMENT"


def test_a_duration_past_ten_years_is_fixed_by_ten_years(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fix is the command with the range's end (it ran as prose before); a negative
    duration's is not its nearest, 0, which would prune every settled row, but the time ago
    plainly meant, as a dry run (test_prune_older_than_mends)."""
    seed(url)
    code, bad = prune(capsys, url, "--dry-run", "--older-than", "4000d")
    fix = bad["error"]["fix"]
    assert code == 1 and "--older-than 3650d" in fix, fix
    argv = command_words(fix)
    assert argv[:3] == ["mcp-jobs", "db", "prune"]
    assert main([*argv[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "dry_run"
    code, negative = prune(capsys, url, "--dry-run", "--older-than=-5")
    words = command_words(negative["error"]["fix"])
    assert code == 1 and "--older-than=5d" in words and "--dry-run" in words, negative


def test_audit_events_of_no_job_past_the_audit_retention_are_counted_and_pruned(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def run() -> None:
        import time

        now = time.time_ns() // 1_000_000
        for at in (now - 91 * 86_400_000, now - 89 * 86_400_000):
            jobs = await connect(url, clock=ManualClock(at), registry=JobRegistry())
            try:
                await jobs.record_event("mcp.call", actor="agent")
            finally:
                await jobs.close()

    anyio.run(run)
    code, plan = prune(capsys, url, "--dry-run")
    assert code == 0 and plan["audit_events"] == 1
    assert main(["db", "prune", "--database-url", url, "--dry-run"]) == 0
    assert "and 1 audit event(s) of no job" in capsys.readouterr().out
    code, tenant = prune(capsys, url, "--tenant", "acme")
    assert code == 0 and "audit_events" not in tenant
    code, done = prune(capsys, url)
    assert code == 0 and done["audit_events"] == 1
    code, after = prune(capsys, url, "--dry-run")
    assert after["audit_events"] == 0


def test_a_job_kept_longer_by_its_workers_published_policy_is_named(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI has not imported `charge`; its worker keeps done jobs 30 days (in code), and the
    dry run goes by that and says so."""

    async def run() -> None:
        app = JobRegistry()
        declare(app)
        jobs = await connect(url, registry=app)
        try:
            await Worker(jobs, prune=False, retention=Retention(done="30d")).publish_descriptors()
        finally:
            await jobs.close()

    anyio.run(run)
    assert main(["db", "prune", "--database-url", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    (line,) = [row for row in out.splitlines() if row.startswith("job charge")]
    assert line.startswith("job charge by its own policy: done before ")
    code, plan = prune(capsys, url, "--dry-run")
    assert code == 0
    charge = {c["state"]: c["before"] for c in plan["cutoffs"] if c.get("name") == "charge"}
    assert charge["done"] == plan["at"] - 30 * 86_400_000


def test_a_bare_number_is_refused_before_a_write_and_its_fix_is_the_dry_run(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--older-than 7` reads as seconds, and the prune deleted at once every job settled before
    then: 3 jobs an hour old here, where days were most likely meant. A destructive command does
    not guess a unit left out: refused, nothing deleted, the fix the dry run of 7 days."""
    seed(url)
    code, refused = prune(capsys, url, "--older-than", "7")
    error = refused["error"]
    assert (code, error["code"], error["retryable"]) == (1, "INVALID_ARGUMENT", False), error
    assert "a bare number is seconds" in error["cause"]
    words = command_words(error["fix"])
    assert words[words.index("--older-than") + 1] == "7d" and "--dry-run" in words, error
    code, plan = prune(capsys, url, "--dry-run", "--older-than", "30m")
    assert sum(plan["by_state"].values()) == 3  # nothing was deleted
    assert json.loads(run_fix(error["fix"]))["mode"] == "dry_run"
    # Its dry run is refused alike: it counted by seconds, then printed the write it refuses
    # (test_prune_line_carries_retention).
    code, counted = prune(capsys, url, "--dry-run", "--older-than", "60")
    assert (code, counted["error"]["code"]) == (1, "INVALID_ARGUMENT"), counted


def test_a_prune_at_a_terminal_draws_its_batches(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune of a year's history ran minutes and printed nothing until it ended."""
    seed(url)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["db", "prune", "--database-url", url, "--older-than", "30m"]) == 0
    drawn = capsys.readouterr()
    assert "prune" in drawn.err and "rows pruned" in drawn.err, drawn
    assert drawn.out.startswith("pruned 3 settled job(s)"), drawn.out
