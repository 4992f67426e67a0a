"""`mcp-jobs serve` while the database does not answer: the server starts, its tools answer
DRIVER_UNAVAILABLE (whose fix through MCP is `database_report`), and the schema is migrated
once the database answers. A URL no driver can use still stops the start (a URL the server
refuses does not: tests/postgres/test_serve_refused.py)."""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine import connect
from engine.driver_errors import DatabaseUrlInvalidError, DriverUnavailableError
from engine.errors import JobsError
from mcp_jobs.cli.database_wait import migrated_or_retrying, until_migrated
from tests.mcp.support import Caller


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://nobody@127.0.0.1:{port}/none"


@pytest.mark.slow
async def test_the_server_starts_and_its_report_says_the_database_does_not_answer(
    tmp_path: Path,
) -> None:
    url = _dead_url()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_jobs.cli", "serve", "--database-url", url],
        env=dict(os.environ),
        cwd=str(tmp_path),
    )
    with anyio.fail_after(45):
        async with Client(stdio_client(params)) as client:
            mcp = Caller(client)
            await mcp.load()
            report = await mcp.ok("database_report")
    assert report["reachable"] is False
    assert report["lines"][0].startswith("server: no answer from 127.0.0.1:")


async def test_the_migration_is_tried_again_until_the_database_answers(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = await connect("memory://", migrate=False)
    migrate = jobs.driver.migrate
    tries: list[int] = []
    migrated = anyio.Event()

    async def away_twice() -> None:
        tries.append(len(tries))
        if len(tries) <= 2:
            raise DriverUnavailableError("memory", "away", "mcp-jobs db report")
        await migrate()
        migrated.set()

    monkeypatch.setattr(jobs.driver, "migrate", away_twice)
    try:
        with caplog.at_level(logging.INFO, logger="mcp_jobs.cli"):
            async with migrated_or_retrying(jobs, first_wait_s=0, longest_wait_s=0):
                with anyio.fail_after(10):
                    await migrated.wait()
    finally:
        await jobs.close()
    assert len(tries) == 3
    messages = [r.getMessage() for r in caplog.records if r.name == "mcp_jobs.cli"]
    assert messages[0].startswith("the database does not answer (DRIVER_UNAVAILABLE: memory: away)")
    assert messages[-1] == "the database answers again and is migrated: tools act on it"


async def test_a_failure_no_retry_helps_still_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = await connect("memory://", migrate=False)

    async def refused() -> None:
        raise DatabaseUrlInvalidError("postgresql://h/db", reason="a test's refusal")

    monkeypatch.setattr(jobs.driver, "migrate", refused)
    try:
        with pytest.raises(JobsError) as raised:
            async with migrated_or_retrying(jobs):
                pass
    finally:
        await jobs.close()
    assert raised.value.code == "DATABASE_URL_INVALID"


async def test_a_worker_start_tries_again_while_the_database_does_not_answer_and_no_longer(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mcp-jobs worker` waits for its database (tests/postgres/test_worker_waits.py runs one),
    saying why at each try; a failure no retry helps still stops the start."""
    jobs = await connect("memory://", migrate=False)
    migrate = jobs.driver.migrate
    tries: list[int] = []

    async def away_twice() -> None:
        tries.append(len(tries))
        if len(tries) <= 2:
            raise DriverUnavailableError("memory", "away", "mcp-jobs db report")
        await migrate()

    async def refused() -> None:
        raise DatabaseUrlInvalidError("postgresql://h/db", reason="a test's refusal")

    monkeypatch.setattr(jobs.driver, "migrate", away_twice)
    try:
        with caplog.at_level(logging.WARNING, logger="mcp_jobs.cli"), anyio.fail_after(10):
            await until_migrated(jobs, first_wait_s=0, longest_wait_s=0, say=True)
        monkeypatch.setattr(jobs.driver, "migrate", refused)
        with pytest.raises(JobsError) as raised:
            await until_migrated(jobs, first_wait_s=0, longest_wait_s=0)
    finally:
        await jobs.close()
    assert len(tries) == 3 and raised.value.code == "DATABASE_URL_INVALID"
    said = [r.getMessage() for r in caplog.records if r.name == "mcp_jobs.cli"]
    assert len(said) == 2 and "(why: mcp-jobs db report)" in said[0]
