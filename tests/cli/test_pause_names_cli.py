"""`mcp-jobs queues pause` refuses a queue (the positional) or `--job` name or a `--reason` with a
control character, a name read as an option, and the queue '*', as INVALID_ARGUMENT whose fix,
run as given, pauses what was meant (or lists the queues, for '*'); `queues resume` still
lifts a pause stored under such a name before the rule."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, connect
from engine.drivers.base import PAUSES, require
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


@pytest.mark.parametrize(
    ("argv", "paused"),
    [
        (["mail\x1b[31m"], ("queue", "mail", None)),
        (["two\nlines", "--reason", "smtp down"], ("queue", "twolines", "smtp down")),
        (["--", "-mail"], ("queue", "mail", None)),
        (["--job", "greet\u202e"], ("job", "greet", None)),
        (["--job=--yes"], ("job", "yes", None)),
        (
            ["mail", "--reason", "smtp down\nERROR forged"],
            ("queue", "mail", "smtp down ERROR forged"),
        ),
        (["mail", "--reason=\x1b[0m\n"], ("queue", "mail", None)),
    ],
)
def test_queues_pause_refuses_a_bad_name_or_reason_and_its_fix_runs(
    url: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    paused: tuple[str, str, str | None],
) -> None:
    migrated(url)
    code, refused = run(capsys, "queues", "pause", "--database-url", url, "--json", *argv)
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
    assert refused["error"]["retryable"] is False
    fix = command_words(refused["error"]["fix"])
    assert fix[:3] == ["mcp-jobs", "queues", "pause"], refused["error"]["fix"]
    code, answer = run(capsys, *fix[1:3], "--json", *fix[3:])  # --json before any `--`
    assert code == 0, (refused["error"]["fix"], answer)
    pause = answer["pause"]
    assert (pause["kind"], pause["name"], pause.get("reason")) == paused


@pytest.mark.parametrize(
    ("argv", "listing"), [(["*"], "stats"), (["--", "-"], "stats"), (["--job=--"], "describe")]
)
def test_queues_pause_of_a_name_with_nothing_near_is_refused_and_its_fix_lists_names(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], listing: str
) -> None:
    """'*' (every queue, to a worker: no queue a job can be in), '-' and '--': the listing."""
    migrated(url)
    code, refused = run(capsys, "queues", "pause", "--database-url", url, "--json", *argv)
    assert code == 1 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
    fix = command_words(refused["error"]["fix"])
    assert fix[:3] == ["mcp-jobs", "jobs", listing], refused["error"]["fix"]
    code, answer = run(capsys, *fix[1:])
    assert code == 0 and answer["ok"] is True, answer
    code, listed = run(capsys, "queues", "ls", "--database-url", url, "--json")
    assert listed["pauses"] == []


def test_queues_resume_lifts_a_pause_stored_under_a_bad_name_before_the_rule(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def store() -> None:
        jobs = await connect(url, registry=JobRegistry())
        try:
            pauses = require(jobs.driver, PAUSES)
            await pauses.pause("queue", "ma\nil", "ops", "smtp\ndown", jobs.clock.now_ms())
            await pauses.pause("job", "-greet", None, None, jobs.clock.now_ms())
        finally:
            await jobs.close()

    anyio.run(store)
    db = ["--database-url", url, "--json"]
    code, listed = run(capsys, "queues", "ls", *db)
    assert code == 0 and len(listed["pauses"]) == 2, listed
    code, resumed = run(capsys, "queues", "resume", *db, "ma\nil")
    assert code == 0 and resumed["was_paused"] is True, resumed
    code, resumed = run(capsys, "queues", "resume", *db, "--job=-greet")
    assert code == 0 and resumed["was_paused"] is True, resumed
