"""Hostile arguments to every tool, on SQLite and PostgreSQL, unpinned and pinned to a tenant.

Every answer must be a typed envelope that validates against the tool's outputSchema (`Caller`
checks it), bad input is never `retryable`, no hostile call changes a stored job or step, and
the audit grows by a bounded amount. The arguments come from a fixed seed: a failure replays.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine import JobRegistry, Jobs
from engine.backfill import BackfillRegistry
from engine.errors import short_repr
from mcp_jobs.config import Settings
from mcp_jobs.operations.envelope import PAYLOAD_LIMIT
from tests.mcp.support import Caller, serve, stored_rows

pytestmark = pytest.mark.drivers("sqlite", "postgres", reason="the durable backends")

SEED = 19
CALLS_PER_TOOL = 40
# One audited call's event, at most (tool, outcome, a few arguments cut to 200 characters).
EVENT_BYTES = 2_000
MUTATING = {"enqueue_job", "retry_job", "cancel_job", "run_backfill"}
# Audited too, but every argument is optional: a call left with none is a valid dry run. The
# jobs' clock stands still, so no seeded row is ever past a cutoff and nothing is pruned. A
# pause, or an event sent, may succeed on a hostile but valid name: it changes no job, step or
# event row (the seeded jobs wait on no event).
AUDITED = {
    *MUTATING,
    "prune_history",
    "pause_queue",
    "resume_queue",
    "retry_jobs",
    "cancel_jobs",
    "send_event",
}


def nest(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = {"n": value} if i % 2 else [value]
    return value


STRINGS: list[Any] = [
    "",
    " ",
    "x" * 100_000,
    "y" * 2_000_000,
    "a\x00b",
    "\x00",
    "\ud800",
    "tail \udfff",
    "'; DROP TABLE jobs; --",
    "' OR '1'='1",
    "%_\\",
    "../../etc/passwd",
    "名前\u202e",
    "0" * 32,
    "null",
    "NaN",
]
NUMBERS: list[Any] = [-1, 0, -(2**63), 2**63, 2**64, 10**30, 1e308, -1e308, 1.5, 1e-9]
# The client itself refuses to send deeper than about 250 levels; stdio's own test sends 300.
ODD: list[Any] = [None, True, [], {}, {"k": "v"}, [1, "2"], nest(100), nest(200)]
ANY = STRINGS + NUMBERS + ODD
# Never valid for any job of the test app: hostile inputs must not enqueue anything.
BAD_FIELD: list[Any] = ["x", 1.5, None, [], {}, "\ud800", "a\x00", "x" * 100_000, nest(200)]
INPUTS: list[Any] = [
    *({"user_id": v} for v in [*BAD_FIELD, 0, -1, -(2**70)]),
    *({"order_id": v} for v in BAD_FIELD),
    {},
    [],
    "x",
    None,
    5,
    nest(100),
    nest(200),
    {"\x00": 1},  # (a lone surrogate as a key: the client itself cannot send one)
    {"user_id": float("nan")},
    {"order_id": float("inf")},
]


@dataclass
class Seeded:
    all_ids: list[str]
    other_tenant: list[str]  # ids a server pinned to "acme" must not see


@dataclass
class Outcome:
    calls: int = 0
    mutating: int = 0
    problems: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def flag(self, tool: str, code: str, what: str, arguments: dict[str, Any]) -> None:
        # The shortest example of each kind of failure is the one worth reading.
        key, shown = (tool, code, what), short_repr(arguments, 160)
        if key not in self.problems or len(shown) < len(self.problems[key]):
            self.problems[key] = shown


async def _seed(jobs: Jobs) -> Seeded:
    mine = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    other = await jobs.enqueue("receipt", {"order_id": 2}, tenant_id="globex")
    ready = await jobs.enqueue("greet", {"user_id": 1})
    later = await jobs.enqueue("fulfil", {"order_id": 3}, delay=60)
    gone = await jobs.enqueue("greet", {"user_id": 2})
    await jobs.cancel(gone.id)
    ids = [mine.id, other.id, ready.id, later.id, gone.id]
    return Seeded(all_ids=ids, other_tenant=[other.id])


def _pools(seeded: Seeded, pinned: bool) -> dict[str, dict[str, list[Any]]]:
    # Ids a mutating call may be given: none is a job the caller can see.
    ids = ANY + (seeded.other_tenant if pinned else [])
    return {
        "describe_jobs": {"name": ANY},
        "list_jobs": {
            "state": [*ANY, "READY", ["ready", "bogus"], ["ready"] * 1000],
            "name": ANY,
            "queue": ANY,
            "tenant_id": ANY,
            "limit": ANY,
            "cursor": ANY,
        },
        "inspect_job": {
            "job_id": ids + seeded.all_ids,
            "steps_limit": ANY,
            "steps_cursor": ANY,
            "events_limit": ANY,
            "events_cursor": ANY,
        },
        "queue_stats": {"queues": [*ANY, *([s] for s in STRINGS), list(range(5000))]},
        "diagnose_queue": {"queue": ANY},
        "database_report": {},
        "wait_for_job": {"job_id": ids, "timeout_seconds": ANY},
        "list_backfills": {
            "pending_only": ANY,
            "name": ANY,
            "runs_limit": ANY,
            "runs_cursor": ANY,
        },
        "enqueue_job": {
            "name": [*ANY, "greet", "receipt", "fulfil"],
            "input": INPUTS,
            "tenant_id": [*ANY, "globex"],
            "delay_seconds": ANY,
            "run_at": ANY,
            "on_conflict": [*ANY, "DEDUPE", "replace"],
            "priority": ANY,
        },
        "retry_job": {"job_id": ids, "include_cancelled": ANY},
        "cancel_job": {"job_id": ids},
        "run_backfill": {"name": ANY, "write": ANY, "force": ANY, "wait_seconds": ANY},
        "prune_history": {
            "write": ANY,
            "older_than_seconds": ANY,
            "states": [*ANY, ["ready"], ["done"] * 5, ["DONE"]],
        },
        "pause_queue": {"queue": ANY, "job": ANY, "reason": ANY},
        "resume_queue": {"queue": ANY, "job": ANY},
        "send_event": {"name": ANY, "key": ANY, "payload": ANY, "tenant_id": [*ANY, "globex"]},
        **{
            bulk: {
                "name": ANY,
                "queue": ANY,
                "tenant_id": [*ANY, "globex"],
                "states": [*ANY, ["dead"], ["DEAD"], ["dead"] * 5],
                "error_code": ANY,
                "since_seconds": ANY,
                "write": ANY,
                "confirm": ANY,
            }
            for bulk in ("retry_jobs", "cancel_jobs")
        },
    }


def _arguments(
    rng: random.Random, pool: dict[str, list[Any]], required: set[str]
) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name, values in pool.items():
        keep = rng.random() < (0.9 if name in required else 0.5)
        if keep:
            arguments[name] = rng.choice(values)
    if rng.random() < 0.1:
        arguments[rng.choice(["bogus", "jobId", "include_canceled", "\x00", "k" * 1000])] = 1
    return arguments


async def _fuzz(mcp: Caller, seeded: Seeded, pinned: bool, outcome: Outcome) -> None:
    rng = random.Random(SEED)
    required = {
        t.name: set(t.input_schema.get("required", []))
        for t in (await mcp.client.list_tools()).tools
    }
    pools = _pools(seeded, pinned)
    assert set(pools) == set(mcp.schemas), "a tool without hostile arguments"
    for tool, pool in pools.items():
        for _ in range(CALLS_PER_TOOL):
            arguments = _arguments(rng, pool, required[tool])
            outcome.calls += 1
            outcome.mutating += tool in AUDITED
            try:
                answer = await mcp.call(tool, arguments)
            except Exception as exc:  # no envelope at all, or one that breaks the schema
                outcome.flag(tool, "-", f"no valid envelope: {type(exc).__name__}", arguments)
                continue
            if not answer.is_error:
                if tool in MUTATING:
                    outcome.flag(tool, "ok", "a hostile call succeeded", arguments)
                continue
            error = answer.data["error"]
            if error["retryable"]:
                outcome.flag(tool, error["code"], "bad input answered retryable", arguments)
            if error["code"] == "INTERNAL":
                outcome.flag(tool, error["code"], "bad input crashed the tool", arguments)
            if len(json.dumps(error).encode()) > PAYLOAD_LIMIT:
                outcome.flag(tool, error["code"], "the error is over the bound", arguments)


@pytest.mark.parametrize("tenant", [None, "acme"], ids=["unpinned", "pinned"])
async def test_hostile_arguments_to_every_tool_get_typed_refusals_and_change_nothing(
    jobs: Jobs, app: JobRegistry, backfill_registry: BackfillRegistry, tenant: str | None
) -> None:
    seeded = await _seed(jobs)
    before = {t: await stored_rows(jobs, t) for t in ("jobs", "steps", "events")}
    outcome = Outcome()
    async with serve(jobs, "auto", Settings(tenant=tenant), backfill_registry) as mcp:
        await _fuzz(mcp, seeded, tenant is not None, outcome)
    problems = [
        f"{tool} {code}: {what} — e.g. {args}"
        for (tool, code, what), args in sorted(outcome.problems.items())
    ]
    assert not problems, f"{len(problems)} kind(s) of failure:\n" + "\n".join(problems)
    assert await stored_rows(jobs, "jobs") == before["jobs"]
    assert await stored_rows(jobs, "steps") == before["steps"]
    added = (await stored_rows(jobs, "events"))[len(before["events"]) :]
    assert len(added) <= outcome.mutating
    assert len(json.dumps(added, default=str).encode()) <= outcome.mutating * EVENT_BYTES


async def test_an_argument_a_tool_does_not_declare_is_refused_not_ignored(
    jobs: Jobs, app: JobRegistry, backfill_registry: BackfillRegistry
) -> None:
    dead = await jobs.enqueue("greet", {"user_id": 7})
    await jobs.cancel(dead.id)
    async with serve(jobs, "auto", None, backfill_registry) as mcp:
        schema = next(
            t.input_schema for t in (await mcp.client.list_tools()).tools if t.name == "retry_job"
        )
        assert schema["additionalProperties"] is False
        # Misspelt: silently dropping it would retry with include_cancelled=false.
        refused = await mcp.fails(
            "retry_job", {"job_id": dead.id, "include_canceled": True}, "TOOL_ARGUMENTS_INVALID"
        )
        assert refused["details"]["errors"][0]["loc"] == ["include_canceled"]
    assert (await jobs.get(dead.id)).state == "cancelled"
