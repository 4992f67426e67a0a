"""`mcp-jobs db report` on NATS: the servers and bucket, then what takes the store's room (the
lines of `db nats-report`); a server that does not answer is what the report says."""

from __future__ import annotations

import logging

import anyio
import pytest

from engine.drivers.nats.connection import connect
from engine.drivers.urls import migrate_fix, report_fix
from tests.support.fix_lines import run_fix


async def test_the_report_names_the_servers_and_the_store_s_room(database_url: str) -> None:
    server, _, bucket = database_url.rpartition("/")
    output = await anyio.to_thread.run_sync(lambda: run_fix(report_fix(database_url)))
    # A bucket never made: the report's migrate line makes it, run as given.
    missing = f"servers: {server}, bucket {bucket} missing (run {migrate_fix(database_url)})"
    assert output.splitlines()[0] == missing
    assert "clock: " not in output  # read through the bucket: none yet
    fix = missing.partition("(run ")[2].removesuffix(")")
    await anyio.to_thread.run_sync(lambda: run_fix(fix))
    output = await anyio.to_thread.run_sync(lambda: run_fix(report_fix(database_url)))
    lines = output.splitlines()
    assert lines[0] == f"servers: {server}, bucket {bucket}"
    assert lines[1].startswith("account: file storage ")
    assert [line for line in lines if line.startswith(f"stream KV_{bucket}: ")]
    # The server runs on this machine: one clock.
    assert lines[-1].startswith("clock: this machine's clock agrees with the database server's (")


async def test_a_server_that_does_not_answer_is_what_the_report_says(driver_kind: str) -> None:
    url = "nats://127.0.0.1:1/mcp_jobs"
    output = await anyio.to_thread.run_sync(lambda: run_fix(report_fix(url)))
    assert output.startswith("server: no answer from nats://127.0.0.1:1 (")
    assert (
        output.splitlines()[1] == "start nats-server -js there, or point the URL at where it runs"
    )


async def test_a_one_try_connect_fails_once_every_server_refused(
    driver_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """nats-py goes round the servers until the connect's bound (here two minutes); a report
    connects once, so it fails as soon as each server has refused, and says no "reconnecting"."""
    servers = ["nats://127.0.0.1:1", "nats://127.0.0.1:2"]
    logged = caplog.at_level(logging.WARNING, logger="mcp_jobs.nats")
    with logged, anyio.fail_after(30), pytest.raises(ConnectionRefusedError):
        await connect(servers, 60.0, reconnect=False)
    assert not [r for r in caplog.records if r.name == "mcp_jobs.nats"]
