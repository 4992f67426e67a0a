"""asyncpg failures come out as DRIVER_UNAVAILABLE (transient, with a runnable fix), chained."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.faults import migrate_fix
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.fix_lines import run_fix
from tests.support.ports import free_port
from tests.support.postgres import fresh_database
from tests.support.url_refusals import check_answered_refusal


async def test_a_server_that_is_not_there_is_driver_unavailable(clock: ManualClock) -> None:
    port = free_port()
    # Failing at once (retries through an outage are test_outage's).
    url = f"postgresql://nobody@127.0.0.1:{port}/none"
    driver = PostgresDriver(url, clock=clock, retry_deadline_ms=0)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.get("x")
    finally:
        await driver.close()
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    assert raised.value.retryable
    assert raised.value.fix == f"mcp-jobs db report --database-url {url}"
    # Run as given: the report says what is wrong.
    output = run_fix(raised.value.fix)
    assert f"server: no answer from 127.0.0.1:{port} (ConnectionRefusedError" in output
    assert isinstance(raised.value.__cause__, OSError)


async def test_a_database_never_migrated_says_to_migrate_it_and_that_runs_as_given(
    clock: ManualClock,
) -> None:
    async with fresh_database(migrated=False) as url:
        driver = PostgresDriver(url, clock=clock, listen=False)
        try:
            with pytest.raises(JobsError) as raised:
                await driver.get("x")
            error = raised.value
            assert error.code == "DRIVER_UNAVAILABLE"
            assert isinstance(error.__cause__, asyncpg.PostgresError)
            # The database is named: the bare command would migrate the default SQLite file.
            assert error.fix == f"mcp-jobs db migrate --database-url {shlex.quote(url)}"
            # From another directory, with nothing of this environment but PATH and HOME.
            bin_dir = Path(sys.executable).parent
            env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
            with tempfile.TemporaryDirectory() as elsewhere:
                with anyio.fail_after(60):
                    ran = await anyio.run_process(
                        ["bash", "-c", error.fix], cwd=elsewhere, env=env, check=False
                    )
                assert ran.returncode == 0, ran.stderr.decode()
                assert not os.listdir(elsewhere)  # no SQLite file was made instead
            with pytest.raises(JobsError) as missing:
                await driver.get("x")
            assert missing.value.code == "JOB_NOT_FOUND"  # the schema is there now
        finally:
            await driver.close()


def test_the_migrate_fix_names_the_database_without_its_password() -> None:
    url = "postgresql://app:s3cret@db.example:6432/jobs?sslmode=require"
    assert migrate_fix(url) == (
        "mcp-jobs db migrate --database-url 'postgresql://app@db.example:6432/jobs?sslmode=require'"
    )


def test_the_environments_url_with_a_password_is_named_by_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without its password the URL fails where the line runs unless PGPASSWORD has it; the
    variable holds it there, so the fix names the variable and still prints no password."""
    url = "postgresql://app:s3cret@db.example:6432/jobs"
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", url)
    assert migrate_fix(url) == 'mcp-jobs db migrate --database-url "$MCP_JOBS_DATABASE_URL"'
    # Another URL than the variable's (one typed after --database-url) loses its password.
    other = "postgresql://app:s3cret@db.example:6432/other"
    assert migrate_fix(other) == (
        "mcp-jobs db migrate --database-url postgresql://app@db.example:6432/other"
    )


async def test_pooled_connections_the_server_killed_are_replaced(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    (r,) = await driver.enqueue([request(clock.now_ms())])
    killed = await sql.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    assert killed >= 1
    # The pool may hand out one connection it has not yet seen die; it fails typed, and the
    # next operation gets a fresh connection.
    for _ in range(driver.db.pool_max + 1):
        try:
            assert (await driver.get(r.id)).id == r.id
            break
        except DriverUnavailableError as exc:
            assert exc.retryable
    else:
        pytest.fail("the pool never replaced its dead connections")


async def test_a_closed_drivers_connections_refuse_its_own_background_work(
    driver: PostgresDriver,
) -> None:
    # The driver's calls refuse at their door (engine/testing/kit/test_closed.py); what runs
    # behind them (a held settle, the sweeper) meets the same refusal at the connections.
    await driver.close()
    with pytest.raises(JobsError) as raised:
        await driver.db.idempotent(lambda c: c.fetchval("SELECT 1"))
    assert (raised.value.code, raised.value.retryable) == ("DRIVER_CLOSED", False)


async def _first_read_refused(url: str, clock: ManualClock) -> JobsError:
    """What a driver on `url` raises at its first read."""
    driver = PostgresDriver(url, clock=clock, listen=False)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.get("x")
    finally:
        await driver.close()
    return raised.value


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        ("sslmod=require", 'unrecognized configuration parameter "sslmod"'),
        ("statement_timeout=soon", 'invalid value for parameter "statement_timeout"'),
    ],
)
async def test_a_url_option_the_server_refuses_is_database_url_invalid(
    clock: ManualClock, option: str, refusal: str
) -> None:
    """asyncpg sends an option it does not know to the server as a setting, and the server
    refuses every session over it: no retry can help, so it is not DRIVER_UNAVAILABLE."""
    async with fresh_database() as url:
        error = await _first_read_refused(f"{url}?{option}", clock)
        assert error.code == "DATABASE_URL_INVALID" and not error.retryable
        assert refusal in error.cause
        assert error.fix == f"mcp-jobs db report --database-url {shlex.quote(f'{url}?{option}')}"
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    assert "answered and refused the session (" in output and refusal in output
    assert "an option in the URL's query string is not a setting the server knows" in output


@pytest.mark.parametrize(
    ("path", "user", "said"),
    [
        ("no_such_db_{tag}", None, "the database the URL's path names does not exist"),
        ("postgres", "no_such_role_{tag}", "the URL's user is not a role on this server"),
    ],
)
async def test_a_session_the_server_refuses_is_database_url_invalid(
    pg_url: str, clock: ManualClock, path: str, user: str | None, said: str
) -> None:
    """A database or role the server does not have refuses every session the same way: not
    DRIVER_UNAVAILABLE, which an agent would retry and a starting worker would wait on."""
    tag = os.urandom(4).hex()
    parts = urlsplit(pg_url)
    netloc = (
        parts.netloc if user is None else f"{user.format(tag=tag)}@{parts.netloc.split('@')[-1]}"
    )
    url = urlunsplit(parts._replace(netloc=netloc, path=f"/{path.format(tag=tag)}"))
    error = await _first_read_refused(url, clock)
    check_answered_refusal(error, url)
    assert "does not exist" in error.cause and tag in error.cause
    output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    assert "answered and refused the session (" in output and said in output


@pytest.mark.parametrize("condition", ["data_corrupted", "index_corrupted"])
async def test_data_the_server_found_damaged_is_store_damaged_and_not_retried(
    clock: ManualClock, condition: str
) -> None:
    """The server's own SQLSTATE (XX001, XX002), raised here by a trigger on the jobs table as
    a damaged page would raise it on a read: waiting does not mend the page."""
    async with fresh_database() as url:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                f"""
                CREATE FUNCTION mcp_jobs.damaged() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'invalid page in block 7' USING ERRCODE = '{condition}';
                END $$;
                CREATE TRIGGER damaged BEFORE INSERT ON mcp_jobs.jobs
                FOR EACH ROW EXECUTE FUNCTION mcp_jobs.damaged();
                """
            )
        finally:
            await conn.close()
        driver = PostgresDriver(url, clock=clock, listen=False)
        try:
            with pytest.raises(JobsError) as raised:
                await driver.enqueue([request(clock.now_ms())])
        finally:
            await driver.close()
        error = raised.value
        assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
        assert "invalid page in block 7" in error.cause and "REINDEX" in error.cause
        assert error.fix == f"mcp-jobs db report --database-url {url}"
        output = await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    assert "schema mcp_jobs: version" in output
