"""`mcp-jobs jobs retry-all|cancel-all`: the plan and the exact command that acts; --yes acts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine import connect
from engine.testing.kit.test_select import dead
from mcp_jobs.cli.entry import main
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
    assert again["plan"]["matched"] == 0 and again["act_command"] is not None


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
