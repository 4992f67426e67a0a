"""Answers stay bounded whatever the number of queues and jobs: diagnose_queue lists the most
severe, largest findings and counts the rest, queue_stats the busiest queues with exact totals,
describe_jobs a page of descriptors with a cursor. A finding carries a job's error code, cause
and fix, not the traceback its stored error holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, Retry, Worker, job
from engine.internal_jobs import is_internal
from tests.mcp.conftest import OpenMcp

pytestmark = pytest.mark.drivers("memory", "sqlite", reason="memory is fast; one SQL driver")

# More queues than any answer lists: each has one dead job, and "q-big" three.
QUEUES = 120
# An answer with a page of findings or queues stays well under this, whatever QUEUES is.
ANSWER_BYTES = 80_000


class Item(BaseModel):
    n: int


def declare_many(registry: JobRegistry, count: int = QUEUES) -> list[str]:
    """`count` jobs `boom000…` on queues `q000…`, and `boom_big` on `q-big`: each fails once
    and is dead (its stored error holds the body's traceback)."""
    names = []
    for i in [*range(count), -1]:
        queue, name = (f"q{i:03}", f"boom{i:03}") if i >= 0 else ("q-big", "boom_big")

        async def body(input: Item, ctx: JobContext) -> None:
            raise RuntimeError(f"upstream down for {input.n}")

        body.__name__ = name
        job(
            name=name,
            queue=queue,
            idempotency_key=lambda i: f"n:{i.n}",
            retry=Retry(attempts=1),
            registry=registry,
        )(body)
        names.append(name)
    return names


async def fill_dead(jobs: Jobs, count: int = QUEUES) -> None:
    for i in range(count):
        await jobs.enqueue(f"boom{i:03}", {"n": i})
    for n in range(3):
        await jobs.enqueue("boom_big", {"n": n})
    await Worker(jobs).run_until_idle()


def size(answer: dict[str, Any]) -> int:
    return len(json.dumps(answer))


async def test_diagnose_lists_the_most_severe_largest_findings_and_counts_the_rest(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp
) -> None:
    declare_many(registry)
    await fill_dead(jobs)
    async with open_mcp() as mcp:
        found = await mcp.ok("diagnose_queue")
        assert size(found) < ANSWER_BYTES, size(found)
        findings = found["findings"]
        dead = [f for f in findings if f["code"] == "DEAD_LETTERS"]
        assert len(dead) == 50 and found["finding_counts"]["DEAD_LETTERS"] == QUEUES + 1
        assert dead[0]["queue"] == "q-big"  # the largest first
        assert found["healthy"] is False
        # A finding names the error, not the job's stored details (its traceback).
        assert all("details" not in (f.get("last_error") or {}) for f in findings)
        assert "upstream down" in dead[0]["cause"]
        note = findings[-1]
        assert note["code"] == "MORE_FINDINGS" and note["severity"] == "info"
        assert f"{QUEUES + 1 - 50} more finding(s)" in note["cause"]
        assert len(found["queues"]) == 50 and found["queues_left_out"] == QUEUES + 1 - 50
        # The note's call runs as given: that queue's diagnosis, in full.
        call = note["next_call"]
        assert call["tool"] == "diagnose_queue"
        one = await mcp.ok(call["tool"], call["arguments"])
        assert [f["code"] for f in one["findings"]] == ["DEAD_LETTERS"]
        assert "queues_left_out" not in one and "MORE_FINDINGS" not in str(one)


async def test_queue_stats_lists_the_busiest_queues_with_exact_totals(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp
) -> None:
    declare_many(registry)
    await fill_dead(jobs)
    async with open_mcp() as mcp:
        stats = await mcp.ok("queue_stats")
        assert size(stats) < ANSWER_BYTES, size(stats)
        listed = [q["queue"] for q in stats["queues"]]
        assert len(listed) == 50 and "q-big" in listed
        assert listed == sorted(listed)  # the busiest, shown by name
        assert stats["queues_left_out"] == QUEUES + 1 - 50
        totals = stats["totals"]
        assert totals["queues"] == QUEUES + 1 and totals["dead"] == QUEUES + 3
        every = await mcp.ok("queue_stats", {"limit": 200})
        assert len(every["queues"]) == QUEUES + 1 and "queues_left_out" not in every
        assert every["totals"] == totals
        named = await mcp.ok("queue_stats", {"queues": ["q007"]})
        assert [q["queue"] for q in named["queues"]] == ["q007"]
        assert named["totals"]["dead"] == 1


async def test_describe_jobs_pages_its_descriptors(
    jobs: Jobs, registry: JobRegistry, open_mcp: OpenMcp
) -> None:
    declare_many(registry)
    async with open_mcp() as mcp:
        first = await mcp.ok("describe_jobs")
        assert size(first) < ANSWER_BYTES, size(first)
        assert len(first["jobs"]) == 50 and first["next_cursor"]
        seen = [d["name"] for d in first["jobs"]]
        cursor = first["next_cursor"]
        while cursor:
            page = await mcp.ok("describe_jobs", {"cursor": cursor, "limit": 200})
            assert "tasks" not in page  # the first page's
            seen += [d["name"] for d in page["jobs"]]
            cursor = page.get("next_cursor")
        expected = sorted(n for n in registry.names() if not is_internal(n))
        assert seen == expected
        one = await mcp.ok("describe_jobs", {"name": "boom007"})
        assert [d["name"] for d in one["jobs"]] == ["boom007"] and "next_cursor" not in one
