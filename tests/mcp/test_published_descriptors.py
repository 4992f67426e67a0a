"""A server started without the app: describe_jobs, enqueue_job and `jobs://descriptors` answer
from the descriptors a worker with the app published (engine/descriptors.py)."""

from __future__ import annotations

import json

from mcp.types import TextResourceContents

from engine import JobRegistry, Jobs, ManualClock
from engine.backfill import BackfillRegistry
from engine.descriptors import STALE_AFTER_MS
from tests.mcp.support import Caller, publish_charge, serve


async def _descriptors(mcp: Caller) -> list[dict[str, object]]:
    result = await mcp.client.read_resource("jobs://descriptors")
    (content,) = result.contents
    assert isinstance(content, TextResourceContents)
    found: list[dict[str, object]] = json.loads(content.text)
    return found


async def test_a_server_without_the_app_describes_and_validates_what_a_worker_published(
    jobs: Jobs, registry: JobRegistry, mode: str, clock: ManualClock
) -> None:
    assert len(registry) == 0  # the server's own registry: no app imported
    worker = await publish_charge(jobs, clock)

    async with serve(jobs, mode, backfills=BackfillRegistry()) as mcp:
        described = await mcp.ok("describe_jobs")
        (charge,) = described["jobs"]
        assert (charge["name"], charge["source"], charge["stale"]) == ("charge", "published", False)
        assert (charge["published_by"], charge["apps"]) == (worker.id, ["shop.jobs"])
        assert charge["key_required"] is True
        assert charge["input_schema"]["properties"]["order_id"]["minimum"] == 1
        assert (await mcp.ok("describe_jobs", {"name": "charge"}))["jobs"] == [charge]
        unknown = await mcp.fails("describe_jobs", {"name": "refund"}, "JOB_UNKNOWN")
        assert unknown["details"]["known"] == ["charge"]

        invalid = await mcp.fails(
            "enqueue_job", {"name": "charge", "input": {"order_id": 0}}, "JOB_INPUT_INVALID"
        )
        assert [e["loc"] for e in invalid["details"]["errors"]] == [["order_id"]]
        missing = await mcp.fails(
            "enqueue_job", {"name": "charge", "input": {"order_id": 3}}, "IDEMPOTENCY_KEY_MISSING"
        )
        assert missing["details"]["argument"] == "key" and "shop.jobs" in missing["cause"]
        assert (await jobs.list()).jobs == []

        (listed,) = await _descriptors(mcp)
        assert {k: listed[k] for k in ("name", "source", "stale")} == {
            "name": "charge",
            "source": "published",
            "stale": False,
        }

        clock.advance(STALE_AFTER_MS + 1)
        assert [d["stale"] for d in (await mcp.ok("describe_jobs"))["jobs"]] == [True]
        assert [d["stale"] for d in await _descriptors(mcp)] == [True]
