"""`db prune --dry-run` at a terminal ends with the line that prunes what it counted, as a
`backfill` or `retry-all` plan ends with the line that acts: it printed the counts alone."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, connect, job
from mcp_jobs.cli import main
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words


class Note(BaseModel):
    n: int


async def _cancelled(url: str, count: int) -> None:
    registry = JobRegistry()

    @job(name="note", idempotency_key=lambda i: str(i.n), registry=registry)
    async def note(input: Note, ctx: JobContext) -> None:
        return None

    jobs = await connect(url, registry=registry, clock=ManualClock())
    for n in range(count):
        await jobs.cancel((await jobs.enqueue("note", {"n": n})).id)
    await jobs.close()


def test_a_prune_plan_ends_with_the_line_that_prunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = migrated(f"sqlite:///{tmp_path / 'jobs.db'}")
    anyio.run(_cancelled, url, 3)
    typed = ["db", "prune", "--dry-run", "--older-than", "0d", "--state", "cancelled"]
    assert main([*typed, "--database-url", url]) == 0
    out = capsys.readouterr().out
    assert "would prune 3 settled job(s)" in out, out
    (line,) = [s for s in out.splitlines() if s.startswith("to prune them: ")]
    words = command_words(line.removeprefix("to prune them: "))
    assert "--dry-run" not in words and words[1:7] == typed[:2] + typed[3:], words
    assert main(words[1:]) == 0  # run as given: it prunes them
    assert "pruned 3 settled job(s)" in capsys.readouterr().out
    assert main([*typed, "--database-url", url]) == 0  # nothing left: no line that acts
    assert "to prune them" not in capsys.readouterr().out
