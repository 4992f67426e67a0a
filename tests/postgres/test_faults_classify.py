"""A value PostgreSQL refuses is INVALID_ARGUMENT (terminal), never DRIVER_UNAVAILABLE: retrying
the same value fails the same way, and "run db migrate" fixes nothing. The engine checks its
bounds first (tests/parity/test_bounds.py); these reach the driver directly, as a bug or another
caller of the driver would."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import asyncpg.exceptions as pgx
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.faults import DEDUPE_INDEX, unavailable
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.ports import free_port


async def _raised(sql: asyncpg.Connection[asyncpg.Record], query: str, *args: Any) -> Exception:
    try:
        await sql.fetchval(query, *args)
    except Exception as exc:
        return exc
    raise AssertionError(f"{query} did not fail")


@pytest.mark.parametrize(
    ("query", "args"),
    [
        ("SELECT 1 / $1::int", (0,)),  # 22012 division by zero
        ("SELECT $1::text", ("a\x00b",)),  # 22021 a NUL byte in text
        ("SELECT $1::bigint", (2**63,)),  # refused by asyncpg before it is sent
        ("SELECT repeat('x', 2) || chr(0)", ()),  # 54000 a NUL character
    ],
    ids=["division-by-zero", "nul-in-text", "beyond-int64", "chr-0"],
)
async def test_a_raw_data_exception_is_invalid_argument_not_unavailable(
    sql: asyncpg.Connection[asyncpg.Record], pg_url: str, query: str, args: tuple[Any, ...]
) -> None:
    exc = await _raised(sql, query, *args)
    error = unavailable(exc, pg_url, "mcp_jobs")
    assert error.code == "INVALID_ARGUMENT"
    assert error.retryable is False


def test_a_unique_violation_is_a_bad_value_except_on_the_dedupe_index() -> None:
    other = pgx.UniqueViolationError.new({"C": "23505", "M": "dup", "n": "jobs_pkey"})
    held = pgx.UniqueViolationError.new({"C": "23505", "M": "dup", "n": DEDUPE_INDEX})
    assert unavailable(other, "postgresql://x/db", "mcp_jobs").code == "INVALID_ARGUMENT"
    # A held dedupe key is how enqueue learns the key's holder: it stays the driver's to handle.
    assert unavailable(held, "postgresql://x/db", "mcp_jobs").code == "DRIVER_UNAVAILABLE"


@pytest.mark.parametrize(
    "hostile",
    [
        {"key": "a\x00b"},
        {"tenant_id": "a\x00b"},
        {"run_at": 2**63},
        # Incompressible and over the btree row limit of the dedupe index (2704 bytes).
        {"key": secrets.token_hex(1600)},
    ],
    ids=["nul-key", "nul-tenant", "run_at-beyond-int64", "key-over-btree-limit"],
)
async def test_a_value_the_server_refuses_through_the_driver_is_terminal_and_chained(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    hostile: dict[str, Any],
) -> None:
    bad = request(clock.now_ms(), **hostile)
    with pytest.raises(JobsError) as raised:
        await driver.enqueue([bad])
    assert raised.value.code == "INVALID_ARGUMENT"
    assert raised.value.retryable is False
    assert isinstance(raised.value.__cause__, asyncpg.PostgresError | asyncpg.InterfaceError)
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == 0
    # The driver is not left broken: the next good value goes in.
    (ok,) = await driver.enqueue([request(clock.now_ms(), key="fine")])
    assert not ok.deduped


async def test_a_connection_the_server_ended_is_not_said_to_be_out_of_reach(
    pg_url: str, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    """pg_terminate_backend of a worker's connection, the server up: "cannot reach the server"
    sent an operator to look for an outage that was not there (exploreQ)."""
    ended = await asyncpg.connect(pg_url)
    try:
        await sql.execute("SELECT pg_terminate_backend($1)", ended.get_server_pid())
        failed = await _raised(ended, "SELECT 1")
    finally:
        ended.terminate()
    error = unavailable(failed, pg_url, "mcp_jobs")
    assert error.code == "DRIVER_UNAVAILABLE" and error.retryable, error
    assert "the server ended this connection" in error.cause, error.cause
    refused = await _raised_connect(pg_url.replace(f":{_port(pg_url)}/", f":{free_port()}/"))
    assert "cannot reach the server" in unavailable(refused, pg_url, "mcp_jobs").cause


async def _raised_connect(url: str) -> Exception:
    try:
        await asyncpg.connect(url, timeout=5)
    except Exception as exc:
        return exc
    raise AssertionError(f"{url} answered")


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port
