"""`mcp-jobs queues pause` (or `resume`) with neither QUEUE nor `--job NAME` is refused in the
command line's words, naming the missing argument and what it could name: the known queues to
pause, the pauses in force to resume. It said `queue=None is not accepted`, the tool's
argument in Python's spelling. Its fix lists the queues and runs as given; nothing is paused."""

from __future__ import annotations

import pytest

from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.cli.support import run, stored_job
from tests.support.fix_lines import command_words
from tests.support.ports import free_port


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, refused = run(capsys, *argv, "--json")
    # 2, as the parser's own refusal of a missing argument (`jobs show` with no id).
    assert code == 2 and refused["error"]["code"] == "INVALID_ARGUMENT", refused
    error: dict[str, object] = refused["error"]
    return error


def test_pause_naming_nothing_names_queue_and_the_known_queues(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    stored_job(url, "send_receipt", "emails")
    error = _refused(capsys, "queues", "pause", "--database-url", url)
    cause = str(error["cause"])
    assert "None" not in cause and "queue=" not in cause, cause
    assert cause.startswith("mcp-jobs queues pause: "), cause
    assert "QUEUE" in cause and "--job NAME" in cause, cause
    # (An app imported earlier in the process may add the queues of the jobs it declares.)
    assert "emails" in cause.partition("(known queues: ")[2], cause
    fix = command_words(str(error["fix"]))
    assert fix[1:3] == ["jobs", "stats"], error["fix"]
    code, stats = run(capsys, *fix[1:])
    assert code == 0 and "emails" in [q["queue"] for q in stats["queues"]]
    code, pauses = run(capsys, "queues", "ls", "--database-url", url, "--json")
    assert code == 0 and pauses["pauses"] == []


def test_resume_naming_nothing_names_the_pauses_in_force(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    db = ["--database-url", url]
    error = _refused(capsys, "queues", "resume", *db)
    assert str(error["cause"]).endswith("(paused now: none)"), error["cause"]
    assert run(capsys, "queues", "pause", "mail", *db)[0] == 0
    assert run(capsys, "queues", "pause", "--job", "greet", *db)[0] == 0
    error = _refused(capsys, "queues", "resume", *db)
    cause = str(error["cause"])
    assert "None" not in cause and "QUEUE" in cause, cause
    assert "paused now: job greet, queue mail" in cause, cause
    fix = command_words(str(error["fix"]))
    code, _ = run(capsys, *fix[1:])
    assert code == 0, error["fix"]
    code, pauses = run(capsys, "queues", "ls", *db, "--json")
    assert [p["name"] for p in pauses["pauses"]] == ["greet", "mail"]  # nothing resumed


def test_the_text_refusal_says_the_same(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    stored_job(url, "send_receipt", "emails")
    assert main(["queues", "pause", "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert "required: QUEUE, or --job NAME (known queues: " in err and "emails" in err, err
    assert "queue=None" not in err


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_naming_nothing_with_the_database_away_is_still_a_usage_mistake(
    action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It exited 75 (retry later), as if the same line would work once the server answered.
    away = f"postgresql://nobody@127.0.0.1:{free_port()}/none"
    error = _refused(capsys, "queues", action, "--database-url", away)
    what = "known queues" if action == "pause" else "paused now"
    assert f"({what}: not read: " in str(error["cause"]), error["cause"]
    assert error["retryable"] is False


@pytest.mark.parametrize(("action", "listing"), [("pause", "jobs stats"), ("resume", "queues ls")])
def test_the_fix_lists_the_names_with_json_only_where_it_was_typed(
    action: str, listing: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    assert main(["queues", action, "--database-url", url]) == 2
    fix = capsys.readouterr().err.partition("fix:")[2].strip()
    words = command_words(fix)
    assert f"mcp-jobs {listing} " in fix and "--json" not in words, fix
    assert main(words[1:]) == 0
    capsys.readouterr()
    error = _refused(capsys, "queues", action, "--database-url", url)
    assert " --json" in str(error["fix"]), error
