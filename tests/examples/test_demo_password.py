"""`mcp-jobs demo` never shows the database password: not in what it prints, not on the server
child's command line (which `ps` shows to every local user)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest

from engine.drivers import DATABASE_URL_ENV
from engine.drivers.urls import redact
from examples import demo

PASSWORD = "s3cret-Pa55"
URL = f"postgresql://mcpjobs:{PASSWORD}@db.example:5432/jobs?sslmode=prefer"


def test_the_server_child_gets_the_url_from_its_environment_not_argv() -> None:
    params = demo.server_command(URL)
    assert PASSWORD not in " ".join([params.command, *params.args])
    assert params.env is not None and params.env[DATABASE_URL_ENV] == URL


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (URL, "postgresql://mcpjobs:***@db.example:5432/jobs?sslmode=prefer"),
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?password=p", "postgresql://u@h/db?password=***"),
        ("sqlite:///.mcp-jobs/jobs.db", "sqlite:///.mcp-jobs/jobs.db"),
        ("redis://:pw@h:6379/0?prefix=a", "redis://:***@h:6379/0?prefix=a"),
        ("nats://s3cr3t@h1:4222,u:p@h2/jobs", "nats://***@h1:4222,u:***@h2/jobs"),
        ("nats://h:4222/jobs?token=t", "nats://h:4222/jobs?token=***"),
    ],
)
def test_a_printed_url_has_its_password_masked(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert demo.banner(url) == f"mcp-jobs demo — database {shown}, app {demo.APP}"


def _with_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}:{PASSWORD}@{host}"))


@pytest.mark.slow
async def test_the_demo_on_postgres_prints_no_password(tmp_path: Path) -> None:
    if not os.environ.get("MCP_JOBS_TEST_PG_DSN"):
        pytest.skip("MCP_JOBS_TEST_PG_DSN is not set (.ci/run sets it)")
    from tests.support.postgres import fresh_database

    async with fresh_database() as url:
        # The test server trusts local connections, so the password is carried but never needed.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
        env[DATABASE_URL_ENV] = _with_password(url)
        with anyio.fail_after(55):
            result = await anyio.run_process(
                [sys.executable, "-m", "mcp_jobs.cli", "demo"], cwd=tmp_path, env=env, check=False
            )
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, out[-3000:] + err[-3000:]
    assert "demo finished" in out
    assert PASSWORD not in out and PASSWORD not in err
    # The printed server command is the child's whole argv.
    server_line = next(line for line in out.splitlines() if line.startswith("server: "))
    assert "--database-url" not in server_line
