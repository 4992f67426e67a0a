"""`mcp-jobs jobs retry-all|cancel-all`: the plan and the exact command that acts; --yes acts."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine import Jobs, connect
from engine.testing.kit.test_select import dead
from mcp_jobs.cli import render
from mcp_jobs.cli.entry import main
from mcp_jobs.operations import bulk
from mcp_jobs.server.audit import AUDIT_EVENT
from tests.cli.support import run
from tests.mcp.support import stored_rows
from tests.support.fix_lines import command_words


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


async def _two_dead(url: str) -> str:
    jobs = await connect(url)
    try:
        job = await dead(jobs.driver, "DRIVER_UNAVAILABLE")
        await dead(jobs.driver, "JOB_FAILED")
    finally:
        await jobs.close()
    return job


def test_retry_all_prints_the_plan_and_the_command_then_acts_with_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    job = anyio.run(_two_dead, url)
    argv = ["jobs", "retry-all", "--error-code", "DRIVER_UNAVAILABLE", "--database-url", url]
    code, planned = _run(capsys, [*argv, "--json"])
    assert code == 0 and planned["mode"] == "plan" and planned["plan"]["matched"] == 1
    command = command_words(planned["act_command"])
    assert command[1] == "jobs" and "--yes" in command and url in command
    code, done = _run(capsys, [*command[1:], "--json"])
    assert code == 0 and done["outcome"]["acted_ids"] == [job]
    code, again = _run(capsys, [*argv, "--dry-run", "--json"])
    # Nothing left to retry: no command that acts on it (run, it would do nothing).
    assert again["plan"]["matched"] == 0 and again.get("act_command") is None


def test_a_filter_naming_no_known_job_or_queue_is_refused_with_the_command_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`retry-all --name fulfil_ordr` answered a healthy plan of nothing and the command to act
    on it; `cancel-all --queue defualt --yes` acted on nothing and exited 0."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    anyio.run(_two_dead, url)
    db = ["--database-url", url, "--app", "examples.shop", "--json"]
    code, nope = _run(capsys, ["jobs", "retry-all", "--name", "nope", *db])
    assert code == 1 and nope["error"]["code"] == "JOB_UNKNOWN"
    assert command_words(nope["error"]["fix"])[1:3] == ["jobs", "describe"]
    code, slip = _run(capsys, ["jobs", "retry-all", "--name", "fulfil_ordr", *db])
    assert code == 1 and slip["error"]["details"]["meant"] == "fulfil_order"
    fix = command_words(slip["error"]["fix"])
    assert fix[1:5] == ["jobs", "retry-all", "--name", "fulfil_order"]
    code, planned = _run(capsys, fix[1:])
    assert code == 0 and planned["mode"] == "plan" and planned["plan"]["matched"] == 0
    argv = ["jobs", "cancel-all", "--queue", "defualt", "--yes", *db]
    code, queue = _run(capsys, argv)
    assert code == 1 and queue["error"]["code"] == "QUEUE_UNKNOWN"
    # A slip of the keys is a guess: the line so mended plans, it does not act (no --yes).
    fix = command_words(queue["error"]["fix"])
    assert fix[1:5] == ["jobs", "cancel-all", "--queue", "default"] and "--yes" not in fix
    code, planned = _run(capsys, fix[1:])
    assert code == 0 and planned["mode"] == "plan" and planned["plan"]["matched"] == 0


async def _dead(url: str, n: int) -> list[str]:
    jobs = await connect(url)
    try:
        return [await dead(jobs.driver, "DRIVER_UNAVAILABLE") for _ in range(n)]
    finally:
        await jobs.close()


async def _stored(url: str, ids: list[str]) -> tuple[list[str], list[tuple[Any, dict[str, Any]]]]:
    """The ids of `ids` now ready, and each action audit event as (actor, data)."""
    jobs = await connect(url)
    try:
        ready = [j for j in ids if (await jobs.get(j)).state == "ready"]
        rows = await stored_rows(jobs, "events")
    finally:
        await jobs.close()
    # SQLite's events: (seq, job_id, at, kind, actor, tenant_id, data).
    return ready, [(r[4], json.loads(r[6])) for r in rows if r[3] == AUDIT_EVENT]


def test_bulk_commands_print_text_and_record_the_action(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan and the action printed the raw envelope as text (45 KB of ids with --yes), the
    plan showed the cap as the count, and the CLI wrote no audit event of the action."""
    ids = anyio.run(_dead, url, 8)
    monkeypatch.setattr(bulk, "MAX_BULK_JOBS", 7)
    argv = ["jobs", "retry-all", "--name", "fulfil", "--database-url", url]
    code, text = run(capsys, *argv)
    assert code == 0 and not text.lstrip().startswith("{")
    assert "7 of 8" in text and "--yes" in command_words(text.splitlines()[-1])
    code, planned = run(capsys, *argv, "--json")
    assert (planned["plan"]["matched"], planned["plan"]["total"]) == (7, 8)
    code, text = run(capsys, *argv, "--yes")
    assert code == 0 and not text.lstrip().startswith("{") and "retried 7" in text
    assert sum(job_id in text for job_id in ids) == render.SHOWN_IDS
    ready, events = anyio.run(_stored, url, ids)
    assert len(ready) == 7
    ((actor, data),) = events
    assert actor == "cli" and data["tool"] == "retry_jobs"
    assert data["arguments"]["acted"] == 7 and data["arguments"]["name"] == "fulfil"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_bulk_command_says_how_far_it_got_and_what_does_the_rest(
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    signum: signal.Signals,
) -> None:
    """Ctrl-C or SIGTERM during `retry-all --yes` exited 130 in silence with part of the plan
    done and nothing recorded: now it stops after the job in hand, prints the counts and the
    command that does the rest, records the action, and still exits 130."""
    ids = anyio.run(_dead, url, 5)
    real = Jobs.retry
    calls = 0

    async def signalled(self: Jobs, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            os.kill(os.getpid(), signum)  # injected: the signal lands while a job is in hand
        return await real(self, *args, **kwargs)

    def unhandled(signum: int, frame: object) -> None:
        raise AssertionError(f"signal {signum} reached no handler of the command")

    monkeypatch.setattr(Jobs, "retry", signalled)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        code, text = run(
            capsys, "jobs", "retry-all", "--name", "fulfil", "--yes", "--database-url", url
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    monkeypatch.undo()
    ready, events = anyio.run(_stored, url, ids)
    assert code == 130 and 2 <= len(ready) < 5
    assert f"interrupted after {len(ready)} of 5" in text
    rest = command_words(text.splitlines()[-1])
    assert rest[1:4] == ["jobs", "retry-all", "--name"] and "--yes" in rest
    ((actor, data),) = events
    assert actor == "cli" and data["arguments"]["acted"] == len(ready)
    assert data["arguments"]["interrupted"] is True
    code, text = run(capsys, *rest[1:])
    assert code == 0 and len(anyio.run(_stored, url, ids)[0]) == 5


def test_an_error_code_nothing_holds_is_refused_with_the_plan_of_the_one_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """exploreZ: `retry-all --error-code JOB_FAILD` printed "retry 0 job(s)", exit 0."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    monkeypatch.delenv("MCP_JOBS_APP", raising=False)
    anyio.run(_two_dead, url)
    argv = ["jobs", "retry-all", "--error-code", "JOB_FAILD", "--yes", "--database-url", url]
    code, slip = _run(capsys, [*argv, "--json"])
    assert code == 1 and slip["error"]["code"] == "ERROR_CODE_UNKNOWN", slip
    fix = command_words(slip["error"]["fix"])
    # A slip of the keys on a write: the line is the plan of the code meant, without --yes.
    assert fix[1:5] == ["jobs", "retry-all", "--error-code", "JOB_FAILED"] and "--yes" not in fix
    code, planned = _run(capsys, fix[1:])
    assert code == 0 and planned["mode"] == "plan" and planned["plan"]["matched"] == 1
