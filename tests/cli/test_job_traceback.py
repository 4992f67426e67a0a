"""`mcp-jobs jobs show ID` prints a failed body's traceback under its error, each line escaped as
the rest of the text is; `--json` carries it in `last_error.details.traceback`."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Retry, Worker, connect, job
from tests.cli.support import run


class Item(BaseModel):
    n: int


def read_setting(settings: dict[str, str], key: str) -> str:
    raise LookupError(f"no setting {key}")


def dead_job(url: str) -> str:
    async def make() -> str:
        registry = JobRegistry()

        @job(idempotency_key=lambda i: f"i:{i.n}", retry=Retry(attempts=1), registry=registry)
        async def configure(input: Item, ctx: JobContext) -> None:
            read_setting({}, "colour\x1b[31m")

        jobs = await connect(url, registry=registry)
        try:
            queued = await jobs.enqueue(configure, {"n": 1})
            await Worker(jobs, prune=False).run_until_idle()
            assert (await jobs.get(queued.id)).state == "dead"
            return queued.id
        finally:
            await jobs.close()

    return anyio.run(make)


def test_jobs_show_prints_the_traceback_under_the_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = dead_job(url)
    code, shown = run(capsys, "jobs", "show", job_id, "--database-url", url, "--json")
    assert code == 0
    trace = shown["job"]["last_error"]["details"]["traceback"]
    line = read_setting.__code__.co_firstlineno + 1
    assert f'File "{__file__}", line {line}, in read_setting' in trace

    code, out = run(capsys, "jobs", "show", job_id, "--database-url", url)
    assert code == 0
    lines = out.splitlines()
    at = lines.index("    traceback:")
    assert lines[at - 2].startswith("  last error: JOB_FAILED: LookupError: ")
    below = lines[at + 1 :]
    assert below[0] == "      Traceback (most recent call last):"
    assert f'        File "{__file__}", line {line}, in read_setting' in below
    assert '          raise LookupError(f"no setting {key}")' in below
    # The body's text cannot recolour the terminal: its ESC is written as \x1b.
    assert "      LookupError: no setting colour\\x1b[31m" in below
    assert "\x1b" not in out
