"""`mcp-jobs queues pause|resume|ls`: the tool's envelopes under --json, idempotent answers, the
pause held in the database for every process, and --tenant refused with a fix that runs."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, connect
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


def stored(url: str) -> list[tuple[str, str, str | None]]:
    async def read() -> list[tuple[str, str, str | None]]:
        jobs = await connect(url, registry=JobRegistry())
        try:
            return [(p.kind, p.name, p.paused_by) for p in await jobs.pauses()]
        finally:
            await jobs.close()

    return anyio.run(read)


def test_pause_resume_and_list(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    db = ["--database-url", url]
    code, paused = run(capsys, "queues", "pause", "mail", "--reason", "smtp down", *db, "--json")
    assert code == 0 and paused["already_paused"] is False
    assert paused["pause"]["paused_by"] == "cli" and paused["pause"]["reason"] == "smtp down"
    # (An app imported earlier in the process may prefix the environment it declares.)
    assert "mcp-jobs queues resume mail --database-url" in paused["resume"]
    code, again = run(capsys, "queues", "pause", "mail", *db, "--json")
    assert code == 0 and again["already_paused"] is True
    assert run(capsys, "queues", "pause", "--job", "greet", *db)[0] == 0
    assert stored(url) == [("job", "greet", "cli"), ("queue", "mail", "cli")]

    code, text = run(capsys, "queues", "ls", *db)
    assert code == 0 and "smtp down" in text and "greet" in text
    code, listed = run(capsys, "queues", "ls", *db, "--json")
    assert [p["name"] for p in listed["pauses"]] == ["greet", "mail"]

    code, resumed = run(capsys, "queues", "resume", "mail", *db, "--json")
    assert code == 0 and resumed["was_paused"] is True
    # Not paused now, and no job, row or worker uses it: not paused, and a notice that the name
    # is unknown (a known one answers was_paused false alone: tests/mcp/test_pause_tools.py).
    code, none = run(capsys, "queues", "resume", "mail", *db, "--json")
    assert code == 0 and none["was_paused"] is False
    assert [n["code"] for n in none["notices"]] == ["QUEUE_UNKNOWN"]
    assert stored(url) == [("job", "greet", "cli")]


def test_a_pause_names_exactly_one_thing(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    code, refused = run(capsys, "queues", "pause", "--database-url", url, "--json")
    assert code == 2 and refused["error"]["code"] == "INVALID_ARGUMENT"
    code, refused = run(
        capsys, "queues", "pause", "mail", "--job", "greet", "--database-url", url, "--json"
    )
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT"


def test_tenant_is_refused_with_a_fix_that_runs(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    argv = ["queues", "pause", "mail", "--tenant", "acme", "--database-url", url, "--json"]
    code, refused = run(capsys, *argv)
    assert code == 1 and refused["error"]["code"] == "TENANT_SCOPE_EXCEEDED"
    assert "give it to the user" not in refused["error"]["cause"]  # the user is at the shell
    assert stored(url) == []
    fix = command_words(refused["error"]["fix"])
    assert fix[:4] == ["mcp-jobs", "queues", "pause", "mail"] and "--tenant" not in fix
    code, paused = run(capsys, *fix[1:])
    assert code == 0 and paused["ok"] is True
    assert stored(url) == [("queue", "mail", "cli")]


def test_naming_both_or_neither_is_refused_with_a_command_that_runs(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    db = ["--database-url", url]
    code, both = run(capsys, "queues", "pause", "mail", "--job", "greet", *db, "--json")
    assert code == 1 and both["error"]["code"] == "INVALID_ARGUMENT"
    fix = command_words(both["error"]["fix"])[1:]
    # The narrower write: the job's pause, not every job of the queue.
    assert fix[:4] == ["queues", "pause", "--job", "greet"] and "mail" not in fix
    code, neither = run(capsys, "queues", "resume", *db, "--json")
    assert code == 2 and "queues ls" in neither["error"]["fix"]  # the pauses to resume
    code, _ = run(capsys, *fix)
    assert code == 0 and stored(url) == [("job", "greet", "cli")]


def test_resuming_a_name_nothing_uses_or_holds_changes_nothing_and_says_so(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With orders paused, `queues resume ordrs` changes nothing, again and again (the resume is
    idempotent), and says the name is unknown, meant orders; its fix lists the pauses."""
    migrated(url)
    db = ["--database-url", url]
    assert run(capsys, "queues", "pause", "orders", *db, "--json")[0] == 0
    for _ in range(2):
        code, answer = run(capsys, "queues", "resume", "ordrs", *db, "--json")
        assert code == 0 and answer["was_paused"] is False
        (notice,) = answer["notices"]
        assert notice["code"] == "QUEUE_UNKNOWN" and "(meant orders?)" in notice["cause"]
        fix = command_words(notice["fix"])
        assert fix[1:3] == ["queues", "ls"], fix
        code, listed = run(capsys, *fix[1:])
        assert code == 0 and [p["name"] for p in listed["pauses"]] == ["orders"]
    assert stored(url) == [("queue", "orders", "cli")]
    code, text = run(capsys, "queues", "resume", "ordrs", *db)
    assert code == 0 and "nothing to resume" in text and "QUEUE_UNKNOWN" in text, text
