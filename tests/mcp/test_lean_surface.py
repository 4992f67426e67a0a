"""What an agent reads (#22 item 5): a compact tools/list whose schemas still hold every answer,
successes without nulls, and every time also in ISO 8601 UTC."""

from __future__ import annotations

import json
import os
import random
import re
import selectors
import subprocess
import sys
import time
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel

from engine import Jobs
from engine.instants import iso
from mcp_jobs.operations import models
from mcp_jobs.operations.envelope import success
from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.prune import PruneHistoryResult
from mcp_jobs.server.app import INSTRUCTIONS
from mcp_jobs.server.schemas import TYPED
from tests.mcp.conftest import OpenMcp

# What `tools/list` costs an agent: the bytes of its JSON-RPC answer line on stdio, as the server
# sends it, for the full tool list and the read-only one.
READ_ONLY_BUDGET = 20_000
# The full list types every field the answers carry (about 450 for 18 tools): this budget guards
# against growth. #22 asked for 20 KB; what it would take is in the closing note of #22. The
# MCP App's `_meta.ui.resourceUri` on three tools (#26) costs 186 bytes of it, prune_history's
# `audit_before` and `audit_events` (the audit retention) 68, the database_report tool (the fix
# of an unreachable database, for a client with no shell) 906, list_jobs' notices (a row that
# cannot be read, named instead of failing the page) 333, pause_queue's notices (a name nothing
# uses) 379, pause_queue's `resume_call` (the resume as a call, not a command) 41,
# prune_history's `unreadable_descriptor` (the fix of a descriptor that cannot be read) 42, the
# bounds of inspect_job's `attempt` and `max_attempts` (a row edited past them is damage) 24,
# list_jobs' cursor saying it goes with the same filters (one sent with others is refused) 15,
# enqueue_job's run_at also as ISO 8601 text (agents are shown times so and pass them back) 92,
# retry_job and retry_jobs taking a delayed job (run it now instead of at its run_at) 61,
# queue_stats' `outbox` (staged rows no queue counts) and a rate limit's `reserved_until` (its
# next start told apart from the end of its reservations) 258, describe_jobs' task `failing`
# (a task that cannot fire, shown as such) 184, resume_queue's and send_event's notices (a
# resume of a name nothing uses answers was_paused false and says so; a send that woke none
# names the events awaited) 386 each. The `*_iso` twins left to the server's instructions took
# 1,344 off it. Answers bounded at any number of queues 731: queue_stats' `limit`,
# `queues_left_out` and `totals`, diagnose_queue's `finding_counts` and `queues_left_out`,
# describe_jobs' `limit`, `cursor` and `next_cursor`; retry_jobs' and cancel_jobs' plan `total`
# (how many match beyond the cap) and outcome `interrupted` 120. retry_jobs' and cancel_jobs'
# notices (a plan an OAuth token may not act on says why, instead of offering a confirm token
# that would be refused) 337 each. describe_jobs' tasks paged with the jobs, published by workers
# and said when no live worker schedules one 298. prune_history's notices (the same, for its dry
# run's token) 337. list_backfills' `declared` (a ledger read back for a backfill not declared
# here) 30.
FULL_BUDGET = 44_205
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ROOT = Path(__file__).resolve().parents[2]


def _wire(read_only: bool) -> tuple[int, list[dict[str, Any]]]:
    """The `tools/list` answer line of `mcp-jobs serve --app examples.shop` on stdio: its size in
    bytes (newline included) and the tools in it."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "lean-surface", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    argv += ["--database-url", "memory://", *(["--read-only"] if read_only else [])]
    # stdin stays open until the answer is read: a server that sees EOF first may end the
    # session before it answers a request still in hand (it did, under load).
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        proc.stdin.flush()
        pending, seen = b"", b""
        try:
            with selectors.DefaultSelector() as ready:
                ready.register(proc.stdout, selectors.EVENT_READ)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and ready.select(deadline - time.monotonic()):
                    chunk = os.read(proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        break
                    seen += chunk
                    pending += chunk
                    while b"\n" in pending:
                        raw, _, pending = pending.partition(b"\n")
                        answer = json.loads(raw)
                        if answer.get("id") == 2:
                            return len(raw) + 1, answer["result"]["tools"]
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    raise AssertionError(f"no tools/list answer: {seen[-2000:]!r}")


def _nodes(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every subschema of `schema`, with its path."""
    found: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(schema, dict):
        return found
    found.append((path, schema))
    for key in ("properties", "$defs", "patternProperties"):
        for name, sub in schema.get(key, {}).items():
            found += _nodes(sub, f"{path}/{key}/{name}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key, [])):
            found += _nodes(sub, f"{path}/{key}/{i}")
    for key in ("items", "additionalProperties", "not"):
        found += _nodes(schema.get(key), f"{path}/{key}")
    return found


def test_tools_list_fits_the_budget_with_valid_typed_schemas() -> None:
    for read_only, budget in ((True, READ_ONLY_BUDGET), (False, FULL_BUDGET)):
        size, listed = _wire(read_only)
        assert size <= budget, (read_only, size)
        for tool in listed:
            for kind in ("inputSchema", "outputSchema"):
                schema = tool[kind]
                Draft202012Validator.check_schema(schema)
                # What MCP Inspector --strict warns about: a node that says nothing of its value.
                untyped = [p for p, node in _nodes(schema) if not any(k in node for k in TYPED)]
                assert not untyped, (tool["name"], kind, untyped)
                titled = [p for p, node in _nodes(schema) if isinstance(node.get("title"), str)]
                assert not titled, (tool["name"], kind, titled)


def test_iso_twins_are_named_once_in_the_instructions() -> None:
    """A validating client checks each property an output schema lists in every answer (for a
    page of 50 jobs, 3 per row): the twins are said once, in the server's instructions."""
    _, listed = _wire(False)
    for tool in listed:
        for path, node in _nodes(tool["outputSchema"]):
            assert "patternProperties" not in node, (tool["name"], path)
            twins = [n for n in node.get("properties", {}) if n.endswith("_iso")]
            assert not twins, (tool["name"], path, twins)
    assert "ISO 8601 UTC twin (`created_at_iso`)" in INSTRUCTIONS


def _answer_models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []

    def walk(cls: type[BaseModel]) -> None:
        if cls in found:
            return
        found.append(cls)
        for field in cls.model_fields.values():
            if field.exclude:
                continue  # never in an answer
            args = typing.get_args(field.annotation)
            for kind in [field.annotation, *args, *(a for x in args for a in typing.get_args(x))]:
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    walk(kind)

    for value in [*vars(models).values(), PruneHistoryResult]:
        if isinstance(value, type) and issubclass(value, Envelope):
            walk(value)
    return found


def test_no_answer_field_is_required_and_nullable() -> None:
    """A success leaves None fields out, and the SDK validates it against the model: a field
    that may be None must not be required (the views give such record fields a default)."""
    offenders = [
        f"{cls.__name__}.{name}"
        for cls in _answer_models()
        for name, field in cls.model_fields.items()
        if field.is_required() and type(None) in typing.get_args(field.annotation)
    ]
    assert offenders == []


def test_iso_is_exact_utc_with_milliseconds() -> None:
    assert iso(1796131200123) == "2026-12-01T13:20:00.123Z"
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(10**18) == "9999-12-31T23:59:59.999Z"  # past datetime's range: clamped
    assert iso(-(10**18)) == "0001-01-01T00:00:00.000Z"
    assert iso(-1) == "1969-12-31T23:59:59.999Z"
    assert iso(-62_135_596_800_000 + 86_400_000 * 365 * 42) == "0042-12-22T00:00:00.000Z"


def test_iso_reads_every_time_as_datetime_does() -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first, last = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    rng = random.Random(27)
    span = (first - epoch) // timedelta(milliseconds=1), (last - epoch) // timedelta(milliseconds=1)
    for ms in [*span, *(rng.randint(*span) for _ in range(5_000))]:
        moment = epoch + timedelta(milliseconds=ms)
        assert iso(ms) == moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"), ms


def _nulls(value: Any, path: str = "") -> list[str]:
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


def _times(value: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every `*_at` / `at` epoch-ms field with its `_iso` twin, at any depth."""
    found: list[tuple[str, Any, Any]] = []
    if isinstance(value, dict):
        for key, v in value.items():
            if (key == "at" or key.endswith("_at")) and isinstance(v, int):
                found.append((f"{path}.{key}", v, value.get(f"{key}_iso")))
            found += _times(v, f"{path}.{key}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _times(v, f"{path}[{i}]")
    return found


async def test_successes_carry_no_null_and_every_time_in_iso(jobs: Jobs, open_mcp: OpenMcp) -> None:
    await jobs.enqueue("fulfil", {"order_id": 7})
    await jobs.enqueue("receipt", {"order_id": 7}, tenant_id="acme")
    (claimed,) = await jobs.driver.claim("w-1", 1, 5_000)
    async with open_mcp() as mcp:
        answers = [
            await mcp.ok("describe_jobs"),
            await mcp.ok("list_jobs"),
            await mcp.ok("inspect_job", {"job_id": claimed.record.id}),
            await mcp.ok("queue_stats"),
            await mcp.ok("diagnose_queue"),
            await mcp.ok("wait_for_job", {"job_id": claimed.record.id, "timeout_seconds": 0}),
            await mcp.ok("list_backfills"),
            await mcp.ok("prune_history"),
        ]
    for answer in answers:
        assert "error" not in answer
        assert _nulls(answer) == [], answer
        for path, ms, text in _times(answer):
            if path.endswith(".data.until") or ".input." in path or ".output." in path:
                continue
            assert text == iso(ms) and ISO.fullmatch(text), (path, ms, text)
    inspected = answers[2]
    assert inspected["lease"]["expires_at_iso"] == iso(claimed.lease_expires_at)
    assert all("at_iso" in e for e in inspected["events"])


def test_success_omits_none_fields_but_keeps_falsy_values() -> None:
    answer = success(models.CancelJobResult(ok=True, stopping=False))
    assert answer == {"ok": True, "stopping": False}
