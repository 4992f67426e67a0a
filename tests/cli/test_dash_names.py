"""A queue or job name that starts with `-` (stored before the name rule refused it) in a fix
line: the line runs as given, the name read as the name (`--job=--yes`, `-- -h`), never as a
flag; and `queues ls` keeps a name with a newline on its own row."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, connect
from engine.drivers.base import PAUSES, require
from schemas.pauses import PauseKind
from tests.cli.databases import migrated
from tests.cli.support import run
from tests.support.fix_lines import command_words


def _stored(url: str, kind: PauseKind, name: str) -> None:
    """A pause stored before the name rule refused its name: written past the client."""

    async def pause() -> None:
        jobs = await connect(url, registry=JobRegistry())
        try:
            await require(jobs.driver, PAUSES).pause(kind, name, None, None, jobs.clock.now_ms())
        finally:
            await jobs.close()

    anyio.run(pause)


@pytest.mark.parametrize(("kind", "name"), [("queue", "-h"), ("queue", "-x y"), ("job", "--yes")])
def test_a_resume_fix_for_a_dashed_name_lifts_that_pause(
    url: str, capsys: pytest.CaptureFixture[str], kind: PauseKind, name: str
) -> None:
    migrated(url)
    _stored(url, kind, name)
    db = ["--database-url", url]
    code, diagnosed = run(capsys, "jobs", "diagnose", *db, "--json")
    (fix,) = [f["fix"] for f in diagnosed["findings"] if f["code"].endswith("_PAUSED")]
    words = command_words(fix)
    assert words[0] == "mcp-jobs"
    code, resumed = run(capsys, *words[1:3], "--json", *words[3:])  # before any `--`
    assert code == 0 and resumed["was_paused"] is True, (fix, resumed)
    assert resumed["pause"] == {**resumed["pause"], "kind": kind, "name": name}


def test_the_worker_line_for_a_dashed_queue_names_that_queue() -> None:
    from mcp_jobs.cli.parser import build_parser
    from mcp_jobs.config import Settings
    from mcp_jobs.fix_context import FixContext

    fixes = FixContext.of(Settings(database_url="sqlite:////tmp/x.db"), face="cli", declared=())
    line = fixes.command("worker", "--queues", "-h")
    args = build_parser().parse_args(command_words(line)[1:])
    assert args.queues == ["-h"] and args.database_url == "sqlite:////tmp/x.db"
    assert fixes.qualify(line) == line  # twice changes nothing


def test_queues_ls_keeps_a_name_with_a_newline_on_one_row(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(url)
    _stored(url, "queue", "two\nlines")
    db = ["--database-url", url]
    code, text = run(capsys, "queues", "ls", *db)
    assert code == 0
    rows = text.strip().splitlines()
    assert len(rows) == 2 and "two" in rows[1] and "lines" in rows[1], text
