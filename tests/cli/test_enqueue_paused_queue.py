"""`mcp-jobs jobs enqueue` into a paused queue says so, as `enqueue_job` does: the answer was
`ready` with no reason. The notice's fix is the `queues resume` line, and it runs as given."""

from __future__ import annotations

import json

import pytest

from tests.cli.databases import migrated
from tests.cli.test_cli import APP, cli, cli_json, shop, words_of
from tests.support.fix_lines import run_fix

__all__ = ["shop"]  # the fixture, used by name


def _receipt(order_id: int) -> tuple[str, ...]:
    given = json.dumps({"order_id": order_id, "email": "a@b.co"})
    return ("jobs", "enqueue", "send_receipt", "--input", given, "--tenant", "acme")


def test_an_enqueue_into_a_paused_queue_says_so_and_its_fix_resumes_it(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = migrated(shop)
    db = ("--database-url", url, "--app", APP)
    code, _ = cli_json(capsys, "queues", "pause", "emails", "--reason", "smtp down", *db)
    assert code == 0
    code, held = cli_json(capsys, *_receipt(1), *db)
    (notice,) = [n for n in held["notices"] if n["code"] == "QUEUE_PAUSED"]
    assert code == 0 and held["state"] == "ready", held
    assert notice["severity"] == "warning" and "(smtp down)" in notice["cause"], notice
    assert notice["job_ids"] == [held["job_id"]] and "next_call" not in notice, notice
    words = words_of(notice["fix"])
    assert words[:3] == ["queues", "resume", "emails"], notice
    assert words[words.index("--database-url") + 1] == url, notice
    # The text answer prints it with its line.
    code, out, _ = cli(capsys, *_receipt(2), *db)
    assert code == 0 and "WARNING QUEUE_PAUSED: queue emails was paused" in out, out
    assert f"fix: {notice['fix']}" in out, out

    run_fix(notice["fix"])
    code, listed = cli_json(capsys, "queues", "ls", *db)
    assert code == 0 and not listed.get("pauses"), listed
    code, free = cli_json(capsys, *_receipt(3), *db)
    assert code == 0 and "QUEUE_PAUSED" not in [n["code"] for n in free["notices"] or []], free
