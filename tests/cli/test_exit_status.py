"""`mcp-jobs` exits 1 for a failure that will fail again as given and 75 (EX_TEMPFAIL) for one whose
error is retryable, so a shell script or cron wrapper can decide to run it again without parsing
`--json`: every failure exited 1, a database briefly away the same as a bad id. The status always
agrees with the `retryable` the error prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_jobs.cli import exit_status as statuses
from mcp_jobs.cli import main
from mcp_jobs.cli.exit_status import (
    FAILED_EXIT,
    SOFTWARE_EXIT,
    TRY_AGAIN_EXIT,
    USAGE_EXIT,
    exit_status,
)
from mcp_jobs.errors import InternalError
from tests.cli.databases import migrated
from tests.support.ports import free_port

# A well-formed job id that no job has.
NO_SUCH_JOB = "0" * 32


def _away() -> str:
    """A PostgreSQL URL where nothing listens: the connection is refused at once, retryable."""
    return f"postgresql://mcpjobs@127.0.0.1:{free_port()}/postgres"


def _text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    envelope: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, envelope


def test_the_status_follows_the_errors_retryable_and_a_success_is_0() -> None:
    def failed(retryable: bool) -> dict[str, Any]:
        return {"ok": False, "error": {"code": "X", "retryable": retryable}}

    assert exit_status({"ok": True}) == 0
    assert exit_status(failed(False)) == FAILED_EXIT == 1
    assert exit_status(failed(True)) == TRY_AGAIN_EXIT == 75
    assert len({0, FAILED_EXIT, TRY_AGAIN_EXIT, USAGE_EXIT, SOFTWARE_EXIT}) == 5
    assert InternalError.code == statuses.INTERNAL


def test_an_unexpected_failure_exits_70_not_the_retryable_75(
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """INTERNAL prints `retryable: true` (an agent may have met a passing race), but a cron
    wrapper that retries on 75 would run a defect again and again: EX_SOFTWARE."""

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a defect")

    monkeypatch.setattr("mcp_jobs.cli.commands.operations.list_jobs", broken)
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", str(tmp_path / "incidents"))
    db = ["--database-url", migrated(url)]
    code, envelope = _json(capsys, "jobs", "ls", *db)
    assert (code, envelope["error"]["code"]) == (SOFTWARE_EXIT, "INTERNAL"), envelope
    assert envelope["error"]["retryable"] is True
    code, err = _text(capsys, "jobs", "ls", *db)
    assert code == SOFTWARE_EXIT == 70 and "error INTERNAL: " in err, err


def test_a_job_not_found_is_not_worth_running_again_and_exits_1(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", migrated(url)]
    code, envelope = _json(capsys, "jobs", "show", NO_SUCH_JOB, *db)
    assert (code, envelope["error"]["code"]) == (FAILED_EXIT, "JOB_NOT_FOUND"), envelope
    assert envelope["error"]["retryable"] is False
    code, err = _text(capsys, "jobs", "show", NO_SUCH_JOB, *db)
    assert code == FAILED_EXIT and err.startswith("error JOB_NOT_FOUND: "), err


def test_a_bad_value_refused_after_parsing_exits_1(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused by the operation (a page over 200), not the parser: 1, not 2."""
    db = ["--database-url", migrated(url)]
    code, envelope = _json(capsys, "jobs", "ls", "--limit", "500", *db)
    assert (code, envelope["error"]["code"]) == (FAILED_EXIT, "LIMIT_EXCEEDED"), envelope
    code, err = _text(capsys, "jobs", "ls", "--limit", "500", *db)
    assert code == FAILED_EXIT and err.startswith("error LIMIT_EXCEEDED: "), err


def test_a_database_that_does_not_answer_is_worth_running_again_and_exits_75(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    away = ["--database-url", _away()]
    for command in (["jobs", "ls"], ["jobs", "show", NO_SUCH_JOB], ["queues", "ls"]):
        code, envelope = _json(capsys, *command, *away)
        assert (code, envelope["error"]["code"]) == (TRY_AGAIN_EXIT, "DRIVER_UNAVAILABLE"), (
            command,
            envelope,
        )
        assert envelope["error"]["retryable"] is True
        code, err = _text(capsys, *command, *away)
        assert code == TRY_AGAIN_EXIT and err.startswith("error DRIVER_UNAVAILABLE: "), err


@pytest.mark.parametrize(
    ("command", "code", "mended"),
    [
        (["jobs", "ls", "--limit", "0"], "INVALID_ARGUMENT", ["--limit", "1"]),
        (["jobs", "ls", "--limit", "5000"], "LIMIT_EXCEEDED", ["--limit", "200"]),
        (["jobs", "stats", "--limit", "0"], "INVALID_ARGUMENT", ["--limit", "1"]),
        (["db", "prune", "--older-than", "7"], "INVALID_ARGUMENT", ["--older-than", "7d"]),
        (["jobs", "enqueue", "x" * 300, "--input", "{}"], "INVALID_ARGUMENT", None),
    ],
)
def test_a_bad_value_is_refused_while_the_database_is_away(
    capsys: pytest.CaptureFixture[str], command: list[str], code: str, mended: list[str] | None
) -> None:
    """Not 75: told to try again later, a retry loop ran the bad value for as long as the outage
    lasted, then got the refusal. The fix is the line typed with the value mended."""
    away = ["--database-url", _away()]
    status, envelope = _json(capsys, *command, *away)
    assert (status, envelope["error"]["code"]) == (FAILED_EXIT, code), envelope
    assert envelope["error"]["retryable"] is False
    if mended is not None:
        fix = envelope["error"]["fix"].split()
        at = fix.index(mended[0])
        assert fix[at : at + 2] == mended and away[1] in fix, fix


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "ls", "--limit", "5"],
        # A cursor names a page of the real store: an empty one cannot judge it.
        ["jobs", "ls", "--cursor", "bm90LWEtY3Vyc29y"],
        ["jobs", "retry", NO_SUCH_JOB],
    ],
)
def test_good_values_while_the_database_is_away_are_still_75(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    status, envelope = _json(capsys, *command, "--database-url", _away())
    assert (status, envelope["error"]["code"]) == (TRY_AGAIN_EXIT, "DRIVER_UNAVAILABLE"), envelope


def test_a_command_line_the_parser_refuses_still_exits_2(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _text(capsys, "jobs", "ls", "--no-such-flag", "--database-url", _away())
    assert code == USAGE_EXIT and "INVALID_ARGUMENT" in err, err


def test_a_shell_reads_75_from_the_command_itself(tmp_path: Path) -> None:
    """Through the interpreter's exit, as a cron wrapper's `$?` sees it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    argv = [sys.executable, "-m", "mcp_jobs.cli", "jobs", "ls", "--database-url", _away()]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == TRY_AGAIN_EXIT, done
    assert done.stderr.startswith("error DRIVER_UNAVAILABLE: "), done.stderr


def test_the_readmes_table_lists_every_status_the_cli_exits_with() -> None:
    """The CLI section's table, row by row, against exit_status.py: none added unsaid."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("| exit status | meaning |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    listed = {int(n) for row in table.splitlines() for n in re.findall(r"\d+", row.split("|")[1])}
    names = [name for name in statuses.__all__ if name.endswith("_EXIT")]
    declared = {0} | {getattr(statuses, name) for name in names}
    assert listed == declared
