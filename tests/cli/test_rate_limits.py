"""`mcp-jobs limits`: the stored rate limits with their next start while they hold work back, the
same envelope under --json, and a tenant pin that hides other tenants' and computed keys."""

from __future__ import annotations

import anyio
import pytest

from engine import JobRegistry, connect
from engine.drivers.base import RATES, require
from engine.rate_limits import RateTake
from tests.cli.databases import migrated
from tests.cli.support import run

HOUR_MS = 3_600_000


def take(url: str, *takes: RateTake) -> int:
    async def go() -> int:
        jobs = await connect(url, registry=JobRegistry())
        try:
            now = jobs.clock.now_ms()
            for one in takes:
                await require(jobs.driver, RATES).take_rates([one], now)
            return now
        finally:
            await jobs.close()

    return anyio.run(go)


def test_limits_lists_keys_and_their_holds(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrated(url)
    db = ["--database-url", url]
    code, text = run(capsys, "limits", *db)
    assert code == 0 and "no rate limits" in text
    now = take(
        url,
        RateTake("job:bill:acme", 1, HOUR_MS, 1),
        RateTake("queue:mail", 50, 1000, 50),
        RateTake("tenant:t1", 5, 60_000, 1),
        RateTake("tenant:t2", 5, 60_000, 1),
    )
    code, listed = run(capsys, "limits", *db, "--json")
    assert code == 0
    by_key = {r["key"]: r for r in listed["rate_limits"]}
    assert list(by_key) == ["job:bill:acme", "queue:mail", "tenant:t1", "tenant:t2"]
    # One start of one per hour holds the next back for the hour; a burst of 50 does not.
    assert now + HOUR_MS - 1_000 <= by_key["job:bill:acme"]["next_start_at"] <= now + HOUR_MS
    assert "next_start_at" not in by_key["queue:mail"]
    assert by_key["queue:mail"]["rate"] == "50 per 1s, burst 50"
    assert by_key["tenant:t1"]["rate"] == "5 per 60s"
    code, text = run(capsys, "limits", *db)
    assert code == 0 and "job:bill:acme" in text and "1 per 3600s" in text
    code, pinned = run(capsys, "limits", *db, "--tenant", "t1", "--json")
    assert code == 0
    assert [r["key"] for r in pinned["rate_limits"]] == ["queue:mail", "tenant:t1"]
