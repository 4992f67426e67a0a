"""`mcp-jobs jobs show` with an id cut short (the first digits copied): JOB_NOT_FOUND names the
one job whose id begins so, and its fix is the command with the whole id, which runs."""

from __future__ import annotations

import anyio
import pytest

from engine import connect
from tests.cli.support import run, stored_job
from tests.support.fix_lines import command_words


def test_an_id_cut_short_is_mended_to_the_whole_id(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stored_job(url, "one", "q")
    stored_job(url, "two", "q")

    async def ids() -> list[str]:
        async with await connect(url) as jobs:
            return [j.id for j in (await jobs.list()).jobs]

    first, second = anyio.run(ids)
    cut = next(n for n in range(12, 32) if first[:n] != second[:n])
    code, refused = run(capsys, "jobs", "show", first[:cut], "--database-url", url, "--json")
    assert code == 1 and refused["error"]["code"] == "JOB_NOT_FOUND"
    assert f"the one job whose id begins {first[:cut]} is {first}" in refused["error"]["cause"]
    words = command_words(refused["error"]["fix"])
    assert words is not None and words[1:4] == ["jobs", "show", first], words
    code, shown = run(capsys, *words[1:])
    assert code == 0 and shown["job"]["id"] == first
