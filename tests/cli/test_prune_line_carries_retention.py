"""A line that prunes carries the retention settings its plan was counted by (exploreY).

`MCP_JOBS_RETAIN_DONE=50d MCP_JOBS_RETAIN_DEAD=forever mcp-jobs db prune --dry-run` counted
33,330 done jobs, and its "to prune them:" line, run as printed from a clean shell, pruned by
the defaults: 173,329, dead letters included. Each line here is run as its reader would run it
(`run_fix`: a scratch directory, nothing of this environment but HOME and PATH) and must prune
exactly what the plan counted. And a dry run of a bare `--older-than 7` (seconds) counted what
the write refuses, then printed that write's line: it is refused alike."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from engine import JobRegistry, ManualClock, connect
from engine.retention import RETAIN_AUDIT_ENV, RETAIN_ENV
from engine.testing.kit.test_retention import settle
from mcp_jobs.cli import main
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from mcp_jobs.prune_context import retention_settings
from tests.cli.test_prune_interrupted import _interrupted
from tests.support.fix_lines import command_words, run_fix
from tests.support.postgres import PG_DSN_ENV, fresh_database

DAY_MS = 86_400_000
# (state, days since it finished, how many): what the defaults (done 7d, dead 30d) and the
# settings below each prune differently.
SEEDED = [("done", 10, 3), ("done", 60, 20), ("dead", 40, 2)]
# What each setting's plan prunes, per state: (done, failed, dead, cancelled).
SETTINGS = [
    ({"MCP_JOBS_RETAIN_DONE": "50d", "MCP_JOBS_RETAIN_DEAD": "forever"}, (20, 0, 0, 0)),
    ({"MCP_JOBS_RETAIN_DONE": "forever"}, (0, 0, 2, 0)),
    ({"MCP_JOBS_RETAIN_DONE": "7d", "MCP_JOBS_RETAIN_DEAD": "45d"}, (23, 0, 0, 0)),
]
# "would prune 20 settled job(s): done 20, …" (a plan), "pruned 20 …" (a write)
_COUNTS = re.compile(
    r"pruned? \d+ settled job\(s\): done (\d+), failed (\d+), dead (\d+), cancelled (\d+)"
)


@pytest.fixture(autouse=True)
def _no_retention_around(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*RETAIN_ENV.values(), RETAIN_AUDIT_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, url: str) -> AsyncIterator[str]:
    """An empty migrated database of each kind, in the CLI tests' own working directory."""
    if request.param == "sqlite":
        yield url
        return
    if not os.environ.get(PG_DSN_ENV):
        pytest.skip(f"{PG_DSN_ENV} is not set")
    async with fresh_database() as pg_url:
        yield pg_url


def _seed(url: str) -> None:
    async def run() -> None:
        now = time.time_ns() // 1_000_000
        for state, days, count in SEEDED:
            clock = ManualClock(now - days * DAY_MS)
            jobs = await connect(url, clock=clock, registry=JobRegistry())
            try:
                for _ in range(count):
                    await settle(jobs.driver, state)  # type: ignore[arg-type]
            finally:
                await jobs.close()

    anyio.run(run)


def _counts(text: str) -> tuple[int, ...]:
    found = _COUNTS.search(text)
    assert found is not None, text
    return tuple(int(n) for n in found.groups())


@pytest.mark.parametrize(("settings", "planned"), SETTINGS)
def test_the_plans_line_prunes_what_the_plan_counted_from_a_clean_shell(
    store: str,
    settings: dict[str, str],
    planned: tuple[int, ...],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _seed(store)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert main(["db", "prune", "--dry-run", "--database-url", store]) == 0
    out = capsys.readouterr().out
    assert _counts(out) == planned, out
    (line,) = [s.removeprefix("to prune them: ") for s in out.splitlines() if "to prune" in s]
    pruned = run_fix(line)
    assert _counts(pruned) == planned, (line, pruned)


def test_the_line_for_the_rest_of_a_stopped_prune_carries_them(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the first batch: the line for the rest, run from a clean shell, prunes the
    rest of that plan (19 done), not the defaults' (22 done and 2 dead)."""
    _seed(url)
    monkeypatch.setenv("MCP_JOBS_RETAIN_DONE", "50d")
    monkeypatch.setenv("MCP_JOBS_RETAIN_DEAD", "forever")
    stopped = _interrupted(["db", "prune", "--database-url", url])
    assert stopped.returncode == 130, (stopped.stdout, stopped.stderr)
    so_far = _counts(stopped.stdout.splitlines()[0])
    rest = run_fix(stopped.stdout.splitlines()[-1])
    both = [a + b for a, b in zip(so_far, _counts(rest), strict=True)]
    assert both == [20, 0, 0, 0], (stopped.stdout, rest)


def test_only_a_line_that_prunes_carries_them_and_only_those_set_otherwise() -> None:
    environ = {
        "MCP_JOBS_RETAIN_DONE": "50d",
        "MCP_JOBS_RETAIN_FAILED": "30d",  # the default: carried or not, it prunes the same
        "MCP_JOBS_RETAIN_DEAD": "90",  # refused: carried as its fix sets it, which an export
        "MCP_JOBS_RETAIN_AUDIT": "1d",  # of that fix could not undo were it carried as set
        "PATH": os.environ.get("PATH", ""),
    }
    assert retention_settings(environ) == (
        ("MCP_JOBS_RETAIN_DONE", "50d"),
        ("MCP_JOBS_RETAIN_DEAD", "90d"),
        ("MCP_JOBS_RETAIN_AUDIT", "1d"),
    )
    fixes = FixContext.of(
        Settings(database_url="sqlite:////tmp/x.db"), face="cli", environ=environ, declared=()
    )
    carried = "MCP_JOBS_RETAIN_DONE=50d MCP_JOBS_RETAIN_DEAD=90d MCP_JOBS_RETAIN_AUDIT=1d mcp-jobs "
    for line in ("mcp-jobs db prune", "mcp-jobs db prune --dry-run", "mcp-jobs worker"):
        assert fixes.qualify(line).startswith(carried), fixes.qualify(line)
    assert fixes.qualify("mcp-jobs jobs ls").startswith("mcp-jobs jobs ls")
    # A line that sets one itself keeps its own value, once.
    own = fixes.qualify("MCP_JOBS_RETAIN_DONE=3d mcp-jobs db prune")
    assert own.count("MCP_JOBS_RETAIN_DONE=") == 1 and "MCP_JOBS_RETAIN_DONE=3d" in own, own


@pytest.mark.parametrize(("typed", "meant"), [("7", "7d"), ("0", "0d"), ("1.5", "1.5d")])
def test_a_dry_run_refuses_a_bare_number_as_the_write_does(
    url: str, capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    _seed(url)

    def refused(*argv: str) -> dict[str, str]:
        code = main(["db", "prune", *argv, "--older-than", typed, "--database-url", url, "--json"])
        error: dict[str, str] = json.loads(capsys.readouterr().out)["error"]
        assert (code, error["code"]) == (1, "INVALID_ARGUMENT"), error
        return error

    dry, write = refused("--dry-run"), refused()
    assert dry["cause"] == write["cause"]
    words = command_words(dry["fix"])
    assert sorted(words) == sorted(command_words(write["fix"])), (dry, write)
    assert words.count("--dry-run") == 1 and words[words.index("--older-than") + 1] == meant
    assert "to prune them" not in run_fix(dry["fix"])  # the fix is a dry run, and it runs


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ended:
        main([*argv, "--help"])
    assert ended.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("bulk", ["retry-all", "cancel-all"])
def test_the_bulk_yes_help_says_what_happens_without_it(
    bulk: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "act on the plan without asking", but nothing ever asks: without --yes the plan
    is printed, nothing changes, and the command exits 0."""
    said = _help(capsys, "jobs", bulk)
    assert "without asking" not in said
    assert "--yes act on the plan; without it the plan is printed and nothing changes" in said
    _seed(url)
    state = "dead"
    if bulk == "cancel-all":  # live jobs to cancel: the dead ones requeued
        assert main(["jobs", "retry-all", "--yes", "--database-url", url]) == 0
        state = "ready"
    capsys.readouterr()
    before = _listed(capsys, url, state)
    assert len(before) == 2, before
    assert main(["jobs", bulk, "--database-url", url]) == 0
    capsys.readouterr()
    assert _listed(capsys, url, state) == before


def _listed(capsys: pytest.CaptureFixture[str], url: str, state: str) -> list[str]:
    assert main(["jobs", "ls", "--state", state, "--database-url", url, "--json"]) == 0
    return [job["id"] for job in json.loads(capsys.readouterr().out)["jobs"]]
