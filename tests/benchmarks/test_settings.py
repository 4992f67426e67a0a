"""The server settings printed beside the numbers read as the server's own SHOW does."""

from __future__ import annotations

import os

import asyncpg
import pytest

from benchmarks.databases import SETTINGS, server_settings

PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"


async def test_each_setting_reads_as_show_prints_it() -> None:
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    printed = await server_settings(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        for name in SETTINGS:
            assert printed[name] == await conn.fetchval(f"SHOW {name}"), name
    finally:
        await conn.close()
    # In the server's own words ("128MB"), not pages and their unit pasted ("163848kB").
    assert printed["shared_buffers"].endswith(("kB", "MB", "GB", "TB"))
