"""Errors raised through the Python API (`connect(url)` -> `Jobs`, and its `Worker`) carry CLI fix
lines that act on the database that client uses: `--database-url` (a relative SQLite path made
absolute, a password never written) and, when the modules that declared the registered jobs can
be named (none is `__main__`), `--app` them. Run as given from another directory, such a line
reads that database, not the default `./.mcp-jobs/jobs.db`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Worker, connect, job
from engine.errors import JobNotFoundError, JobsError
from schemas.jobs import ClaimedJob
from tests.support.fix_lines import run_script

# Writes what the errors it provokes carry; the shop's jobs import from any directory.
SCRIPT = """
import asyncio, json
import examples.shop.jobs  # noqa: F401  (registers the shop's jobs)
from engine import connect

async def main():
    jobs = await connect("sqlite:///x.db")
    made = await jobs.enqueue("import_supplier_prices", {"supplier": "leafco", "batch": "b1"})
    fixes = {"made": made.id}
    calls = [("JOB_NOT_FOUND", jobs.retry("nosuch")), ("JOB_UNKNOWN", jobs.enqueue("nosuch", {}))]
    for code, call in calls:
        try:
            await call
        except Exception as e:
            assert e.code == code, e
            fixes[code] = e.fix
    await jobs.close()
    print(json.dumps(fixes))

asyncio.run(main())
"""


def _bash(line: str, cwd: Path) -> Any:
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_an_api_errors_fix_run_from_another_directory_reads_the_database_in_use(
    tmp_path: Path,
) -> None:
    here, elsewhere, out = run_script(SCRIPT, tmp_path)
    fixes = json.loads(out)
    database = f"sqlite:///{here / 'x.db'}"
    for code in ("JOB_NOT_FOUND", "JOB_UNKNOWN"):
        assert f"--database-url {database}" in fixes[code], fixes[code]
        assert "--app examples.shop.jobs" in fixes[code], fixes[code]

    listed = _bash(fixes["JOB_NOT_FOUND"], elsewhere)  # mcp-jobs jobs ls --json …
    assert [j["id"] for j in listed["jobs"]] == [fixes["made"]]
    described = _bash(fixes["JOB_UNKNOWN"], elsewhere)  # mcp-jobs jobs describe --json …
    names = {d["name"] for d in described["jobs"]}
    assert {"fulfil_order", "import_supplier_prices"} <= names
    assert not (elsewhere / ".mcp-jobs").exists()  # the default database was never opened


class Note(BaseModel):
    n: int


async def test_a_job_declared_in_main_leaves_app_out(tmp_path: Path) -> None:
    registry = JobRegistry()

    async def noted(input: Note, ctx: JobContext) -> None:
        return None

    noted.__module__ = "__main__"  # a script's own job: no --app can import it elsewhere
    job(idempotency_key=lambda i: str(i.n), registry=registry)(noted)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    jobs = await connect(url, registry=registry)
    try:
        with pytest.raises(JobsError) as raised:
            await jobs.describe("nosuch")
        # A shell's `jobs describe` with no --app would describe none of this script's jobs:
        # the fix is the call on this client, which describes them.
        assert raised.value.fix == "await jobs.describe()"
        assert [d.name for d in await jobs.describe()] == ["noted"]
        # A line that needs no app still names the database, and no --app.
        with pytest.raises(JobsError) as missing:
            await jobs.get("nosuch")
        assert missing.value.fix == f"mcp-jobs jobs ls --json --database-url {url}"
    finally:
        await jobs.close()


@pytest.mark.skipif(not os.environ.get("MCP_JOBS_TEST_PG_DSN"), reason="no PostgreSQL")
async def test_a_postgres_password_is_never_written() -> None:
    from tests.support.postgres import fresh_database

    async with fresh_database() as url:
        user, _, rest = url.partition("@")
        with_password = f"{user}:s3cret@{rest}"  # the server trusts this user: any password
        jobs = await connect(with_password, registry=JobRegistry())
        try:
            with pytest.raises(JobNotFoundError) as raised:
                await jobs.get("nosuch")
        finally:
            await jobs.close()
    assert "s3cret" not in raised.value.fix
    assert raised.value.fix == f"mcp-jobs jobs ls --json --database-url {url}"


async def test_an_error_a_worker_raises_carries_the_database() -> None:
    jobs = await connect("memory://", registry=JobRegistry())

    async def claim(*args: object, **kwargs: object) -> list[ClaimedJob]:
        raise JobNotFoundError("gone")

    jobs.driver.claim = claim  # type: ignore[method-assign]
    try:
        with pytest.raises(JobNotFoundError) as raised:
            await Worker(jobs, queues="*").run_until_idle()
    finally:
        await jobs.close()
    # memory:// lives in this process: the fix is the call on this client, not a command
    # (tests/engine/test_api_memory_fixes_are_python_calls.py).
    assert raised.value.fix == "await jobs.list()"
