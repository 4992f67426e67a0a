"""A write pointed at a SQLite file that is not there is never mended onto the file its URL
plainly meant: `qp.db` typed, `qb.db` beside it, and the fix enqueued into `qb.db`, exit 0. Sibling
apps' stores are often a letter apart, so a guessed store gets no write (mcp_jobs/cli/plan_only.py,
as a guessed command line): the cause still names it, and the fix is the write's plan there, else
the read that shows it (`jobs stats`), which run as printed leaves it as it was. A read's fix is
still the read on the file meant."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

import examples.shop
from engine import JobContext, JobRegistry, connect, job
from mcp_jobs.cli import main
from tests.cli.test_cli import APP, shop
from tests.support.fix_lines import command_words, run_fix

__all__ = ["shop"]  # the fixture, used by name

RECEIPT = '{"order_id": 7, "email": "a@b.co"}'
# The flags a fix carries from its context (the typed line's, the process's), left out of the
# comparison: (flag, whether it takes a value).
_CONTEXT = {"--json": False, "--database-url": True, "--app": True, "--tenant": True}


class _Note(BaseModel):
    n: int


def _seeded(url: str) -> str:
    """`url`'s database migrated, holding one ready job on queue `mail`; that job's id."""

    async def seed() -> str:
        registry = JobRegistry()

        async def note(i: _Note, ctx: JobContext) -> None: ...

        declared = job(registry=registry, name="note", queue="mail", idempotency_key=_key)(note)
        jobs = await connect(url, registry=registry, migrate=True)
        try:
            return (await jobs.enqueue(declared, _Note(n=1))).id
        finally:
            await jobs.close()

    return anyio.run(seed)


def _key(item: _Note) -> str:
    return str(item.n)


def _dump(path: Path) -> list[str]:
    """Everything the database at `path` holds, as SQL."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _command(fix: str) -> tuple[list[str], str | None]:
    """The fix's words after the program without the context flags, and its --database-url."""
    words = command_words(fix)[1:]
    kept: list[str] = []
    url = None
    at = 0
    while at < len(words):
        word = words[at]
        if word in _CONTEXT:
            if word == "--database-url":
                url = words[at + 1]
            at += 2 if _CONTEXT[word] else 1
            continue
        kept.append(word)
        at += 1
    return kept, url


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    code = main([*argv, "--json"])
    error: dict[str, Any] = json.loads(capsys.readouterr().out)["error"]
    assert code == 1 and error["code"] == "DATABASE_URL_INVALID", error
    return error


JOB = "{job}"  # the seeded job's id
WRITES = [
    (
        ["jobs", "enqueue", "send_receipt", "--input", RECEIPT, "--tenant", "acme", "--app", APP],
        ["jobs", "stats"],
    ),
    (["queues", "pause", "mail"], ["jobs", "stats"]),
    (["queues", "resume", "mail"], ["jobs", "stats"]),
    (["jobs", "cancel", JOB], ["jobs", "stats"]),
    (["jobs", "retry", JOB], ["jobs", "stats"]),
    (["events", "send", "paid", "7"], ["jobs", "stats"]),
    (["jobs", "drain"], ["jobs", "stats"]),
    (
        ["jobs", "cancel-all", "--state", "ready", "--yes"],
        ["jobs", "cancel-all", "--state", "ready"],
    ),
    (["jobs", "retry-all", "--yes"], ["jobs", "retry-all"]),
    (["db", "prune", "--older-than", "1s"], ["db", "prune", "--dry-run", "--older-than", "1s"]),
    (["backfill", "normalize_emails", "--write", "--app", APP], ["backfill", "normalize_emails"]),
]


@pytest.mark.parametrize(("argv", "shown"), WRITES)
def test_a_write_on_a_missing_file_is_not_mended_onto_the_file_beside_it(
    argv: list[str],
    shown: list[str],
    shop: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    meant, typed = tmp_path / "qb.db", tmp_path / "qp.db"
    job_id = _seeded(f"sqlite:///{meant}")
    assert examples.shop.seed_customers(5) > 0  # what the backfill's dry run reads
    before = _dump(meant)
    argv = [job_id if word == JOB else word for word in argv]
    error = _refused(capsys, [*argv, "--database-url", f"sqlite:///{typed}"])
    assert f"{meant} is a SQLite database (meant that one?)" in error["cause"], error
    words, url = _command(error["fix"])
    assert (words, url) == (shown, f"sqlite:///{meant}"), error["fix"]
    run_fix(error["fix"])
    assert _dump(meant) == before  # the store guessed holds what it held
    assert not typed.exists()


def test_a_write_whose_url_came_from_the_variable_is_not_aimed_there_by_an_export(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `export` of the file meant would send the write typed next to it: the read that shows
    that file is given by the flag."""
    meant = tmp_path / "qb.db"
    _seeded(f"sqlite:///{meant}")
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", f"sqlite:///{tmp_path / 'qp.db'}")
    error = _refused(capsys, ["queues", "pause", "mail"])
    assert not error["fix"].startswith("export "), error["fix"]
    assert _command(error["fix"]) == (["jobs", "stats"], f"sqlite:///{meant}"), error["fix"]


READS = [["jobs", "ls"], ["jobs", "stats"], ["queues", "ls"], ["jobs", "retry-all"]]


@pytest.mark.parametrize("argv", READS)
def test_a_read_on_a_missing_file_is_still_the_read_on_the_file_beside_it(
    argv: list[str], shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meant = tmp_path / "qb.db"
    _seeded(f"sqlite:///{meant}")
    error = _refused(capsys, [*argv, "--database-url", f"sqlite:///{tmp_path / 'qp.db'}"])
    assert _command(error["fix"]) == (argv, f"sqlite:///{meant}"), error["fix"]
    assert json.loads(run_fix(error["fix"]))["ok"] is True
