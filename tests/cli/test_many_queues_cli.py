"""`jobs diagnose`, `jobs stats` and `jobs describe` print a bounded answer at any number of
queues, with a line that says what was left out and the command that shows it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine import JobRegistry, Worker, connect
from mcp_jobs.cli import main
from tests.mcp.test_many_queues import QUEUES, declare_many, fill_dead
from tests.support.fix_lines import command_words


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite file with QUEUES + 1 queues of dead jobs."""
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TENANT"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"

    async def seed() -> None:
        registry = JobRegistry()
        declare_many(registry)
        jobs = await connect(url, registry=registry)
        try:
            await fill_dead(jobs)
            await Worker(jobs).publish_descriptors()  # describe without --app reads them
        finally:
            await jobs.close()

    anyio.run(seed)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def test_diagnose_lists_a_bounded_set_of_findings_and_says_how_to_see_the_rest(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run(capsys, "jobs", "diagnose", "--database-url", url)
    assert len(lines) < 250, len(lines)
    assert sum(line.startswith("WARNING DEAD_LETTERS") for line in lines) == 50
    assert any(f"DEAD_LETTERS {QUEUES + 1}" in line for line in lines), lines[:3]
    (note,) = [i for i, line in enumerate(lines) if line.startswith("INFO MORE_FINDINGS")]
    fix = lines[note + 2].removeprefix("  fix: ")
    words = command_words(fix)[1:]
    assert words[:3] == ["jobs", "diagnose", "--queue"]
    one = run(capsys, *words)
    assert sum(line.startswith("WARNING DEAD_LETTERS") for line in one) == 1


def test_stats_lists_the_busiest_queues_and_the_totals(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run(capsys, "jobs", "stats", "--database-url", url)
    assert len(lines) < 60, len(lines)
    (total,) = [line for line in lines if line.startswith(f"ALL {QUEUES + 1}")]
    assert f" {QUEUES + 3} " in total  # every dead job, the queues left out included
    (more,) = [line for line in lines if "more queue(s)" in line]
    words = command_words(more.split(": ", 1)[1])[1:]
    assert words[:4] == ["jobs", "stats", "--limit", "200"]
    every = run(capsys, *words)
    assert not any("more queue(s)" in line for line in every)
    assert sum(line.startswith("q") for line in every) == QUEUES + 1


def test_describe_pages_with_a_cursor(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # No --app: the descriptors the worker published.
    lines = run(capsys, "jobs", "describe", "--database-url", url)
    assert sum(line.startswith("boom") for line in lines) == 50
    (more,) = [line for line in lines if line.startswith("more jobs: ")]
    words = command_words(more.removeprefix("more jobs: "))[1:]
    assert words[:2] == ["jobs", "describe"] and "--cursor" in words
    following = run(capsys, *words)
    assert following[1].startswith("boom050")


def test_stats_of_named_queues_reads_each_and_its_limit_fix_runs(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--queues a --queues b` once read only b; and a refused --limit's fix was a tool call.
    picked = run(
        capsys, "jobs", "stats", "--queues", "q000", "--queues", "q001", "--database-url", url
    )
    assert [line.split()[0] for line in picked if line.startswith("q0")] == ["q000", "q001"]
    assert (
        main(["jobs", "stats", "--queues", "q000", "q001", "--limit", "500", "--database-url", url])
        == 1
    )
    said = capsys.readouterr()
    fix = next(line for line in (said.out + said.err).splitlines() if "fix:" in line)
    words = command_words(fix.split("fix:", 1)[1].strip())[1:]
    assert words[:2] == ["jobs", "stats"], fix
    assert "--json" not in words  # the line as typed, at the cap (README: "the line at 200")
    again = run(capsys, *words)
    assert [line.split()[0] for line in again if line.startswith("q0")] == ["q000", "q001"]
