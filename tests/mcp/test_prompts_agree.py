"""The prompts agree with the tools (issue #22 item 4): each prompt is rendered, every tool call,
argument, field path and error code it names is read out of its text, and checked against the
answers a live in-process server gives in the situations the prompt describes. A field the
prompt names must exist in a real answer; a code it says is found at a path (`error.code`,
`plan.blocked_by.code`, a finding's `code`) must be the code the server returns there."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.backfill import BackfillRegistry
from engine.errors import REGISTRY
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, NackOptions
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller, Person, serve

TICKED = re.compile(r"`([^`]+)`")
PATH = re.compile(r"[a-z_]+(\[\])?(\.[a-z_]+(\[\])?)*")
CODE = re.compile(r"\b[A-Z][A-Z_]{5,}\b")
# Words the prompts tick as values a field takes, not as fields.
VALUES = {"done", "failed", "completed"}


def _is_value(span: str, values: frozenset[str]) -> bool:
    """A ticked word that is a value or a command, not a field path."""
    return span in VALUES | values or span.startswith(("-", "mcp-jobs"))


def _steps(text: str) -> list[str]:
    return re.split(r"\n(?=\d+\. )", text)


def _resolves(tree: Any, path: str) -> bool:
    """Whether `path` (`a.b`, `a[].b`) is present in `tree`, starting at any object in it."""

    def walk(node: Any, parts: list[str]) -> bool:
        if not parts:
            return True
        key, many = parts[0].removesuffix("[]"), parts[0].endswith("[]")
        if not isinstance(node, dict) or key not in node:
            return False
        value = node[key]
        if many:
            return isinstance(value, list) and any(walk(v, parts[1:]) for v in value)
        return walk(value, parts[1:])

    def nodes(node: Any) -> list[Any]:
        found = [node]
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
        )
        for child in children:
            found += nodes(child)
        return found

    return any(walk(n, path.split(".")) for n in nodes(tree))


def _at(tree: Any, path: str) -> Any:
    for part in path.split("."):
        tree = tree[part] if isinstance(tree, dict) else None
    return tree


async def _check_prompt(
    mcp: Caller,
    text: str,
    answers: list[dict[str, Any]],
    by_code: dict[str, dict[str, Any]],
    values: frozenset[str] = frozenset(),
) -> set[str]:
    """Check every name `text` ticks against the answers; the codes it names at a `.code` path
    against the answer of the situation giving that code. `values` are ticked words that are
    the prompt's own arguments (a backfill's name), not fields. Returns the tools it calls."""
    schemas = {t.name: t.input_schema for t in (await mcp.client.list_tools()).tools}
    called: set[str] = set()
    for span in TICKED.findall(text):
        head, _, rest = span.partition(" ")
        if head in schemas:  # a call, maybe with its arguments
            called.add(head)
            if rest:
                arguments = json.loads(rest)
                assert set(arguments) <= set(schemas[head]["properties"]), span
        elif ": " in span:  # `argument: value`
            argument = span.split(": ")[0]
            assert any(argument in s["properties"] for s in schemas.values()), span
        elif PATH.fullmatch(span) and not _is_value(span, values):
            assert any(_resolves(a, span) for a in answers), f"no answer has `{span}`"
    for step in _steps(text):
        at = [p for p in TICKED.findall(step) if p.endswith(".code") and PATH.fullmatch(p)]
        for code in CODE.findall(step):
            if at and code in by_code:
                assert any(_at(by_code[code], p) == code for p in at), (code, at, step)
    return called


class Signoff(BaseModel):
    order_id: int


def _declare_signoff(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"sign:{i.order_id}", queue="orders", registry=registry)
    async def await_signoff(input: Signoff, ctx: JobContext) -> None:
        await ctx.step.wait_for_event("order.signed", match=str(input.order_id), timeout=3600)


async def _migrated() -> bool:
    return False  # the migration this backfill needs has not run


async def test_run_backfill_safely_agrees_with_the_tools(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    open_mcp: OpenMcp,
    mode: str,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.declare(backfill_registry, name="needs_migration", requires=_migrated)
    customers.declare(backfill_registry, name="staging_only", environments=["staging"])
    answers: list[dict[str, Any]] = []
    by_code: dict[str, dict[str, Any]] = {}
    async with open_mcp() as mcp:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            answer = (await mcp.call(tool, arguments)).data
            answers.append(answer)
            return answer

        rendered = await mcp.client.get_prompt("run_backfill_safely", {"name": "normalize_emails"})
        text = rendered.messages[0].content.text  # type: ignore[union-attr]

        # The walk the prompt describes: list, rehearse, write, wait, confirm.
        await call("list_backfills", {"name": "normalize_emails"})
        dry = await call("run_backfill", {"name": "normalize_emails"})
        assert dry["ok"] and dry["plan"]["rows_remaining"] == 25
        start = await call("run_backfill", {"name": "normalize_emails", "write": True})
        live = await call("list_backfills", {"name": "normalize_emails"})
        assert live["backfills"][0]["live_job_id"] == start["start"]["job_id"]
        by_code["BACKFILL_RUNNING"] = await call("run_backfill", {"name": "normalize_emails"})
        await Worker(jobs).run_until_idle()
        waited = await call("wait_for_job", {"job_id": start["start"]["job_id"]})
        assert waited["settled"] is True
        done = await call("list_backfills", {"name": "normalize_emails"})
        assert done["backfills"][0]["pending"] is False
        assert done["backfills"][0]["last_run"]["status"] == "completed"
        # The situations it says stop in.
        by_code["BACKFILL_APPLIED"] = await call("run_backfill", {"name": "normalize_emails"})
        by_code["BACKFILL_ENVIRONMENT"] = await call("run_backfill", {"name": "staging_only"})
        by_code["BACKFILL_MIGRATION_PENDING"] = await call(
            "run_backfill", {"name": "needs_migration"}
        )
        # The confirmation step: a user who says no, and a client that cannot ask them. Of a
        # write that would run: one that would be refused answers its refusal, asking nobody.
        customers.declare(backfill_registry, name="second_sweep")
        second = {"name": "second_sweep", "write": True}
        async with serve(jobs, mode, backfills=backfill_registry, person=Person("decline")) as no:
            by_code["WRITE_DECLINED"] = (await no.call("run_backfill", second)).data
        async with serve(jobs, mode, backfills=backfill_registry, elicitation=False) as unasked:
            required = (await unasked.call("run_backfill", second)).data
        by_code["CONFIRMATION_REQUIRED"] = required
        answers += [by_code["WRITE_DECLINED"], required]
        called = await _check_prompt(
            mcp, text, answers, by_code, values=frozenset({"normalize_emails"})
        )
    assert called >= {"list_backfills", "run_backfill", "wait_for_job", "inspect_job"}
    # Every code it names was met, where it said.
    assert set(CODE.findall(text)) <= set(by_code)


async def test_diagnose_stalled_jobs_agrees_with_the_tools(
    jobs: Jobs, app: JobRegistry, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    # No worker lives; an order parks on its sleep and overstays it; a ready job ages; one job
    # goes dead; one has a name no worker knows; one worker's lease runs out; one waits for an
    # event.
    _declare_signoff(app)
    order = await jobs.enqueue("fulfil", {"order_id": 1})
    await jobs.enqueue("await_signoff", {"order_id": 1})
    dead = await jobs.enqueue("flaky", {"key": "down"})
    worker = Worker(jobs)
    await worker.run_until_idle()
    clock.advance(2_000)
    await worker.run_until_idle()
    await jobs.driver.enqueue(
        [
            EnqueueRequest(
                id="f" * 32, run_id="e" * 32, name="ghost", queue="mail",
                idempotency_key="ghost", input={}, run_at=clock.now_ms(), max_attempts=1,
            )
        ]
    )  # fmt: skip
    await worker.run_until_idle()
    await jobs.enqueue("greet", {"user_id": 1})
    await jobs.driver.claim("gone", 1, 1_000)
    await jobs.enqueue("greet", {"user_id": 2})
    clock.advance(120_000)
    # One failed its first attempt and waits out a ten-minute backoff.
    waits = EnqueueRequest(
        id="a" * 32, run_id="b" * 32, name="flaky", queue="catalog", idempotency_key="flaky:again",
        input={"key": "again"}, run_at=clock.now_ms(), max_attempts=3,
    )  # fmt: skip
    await jobs.driver.enqueue([waits])
    (claimed,) = await jobs.driver.claim("w", 1, 60_000, ["catalog"])
    failure = ErrorPayload(
        code="JOB_FAILED", title="t", cause="upstream down", fix="f", retryable=True
    )
    await jobs.driver.nack(waits.id, claimed.token, NackOptions(delay_ms=600_000, error=failure))
    assert (await jobs.get(dead.id)).state == "dead"
    assert (await jobs.get(order.id)).state == "suspended"

    answers: list[dict[str, Any]] = []
    async with open_mcp() as mcp:
        rendered = await mcp.client.get_prompt("diagnose_stalled_jobs", {})
        text = rendered.messages[0].content.text  # type: ignore[union-attr]
        found = await mcp.ok("diagnose_queue", {})
        answers.append(found)
        codes = {f["code"] for f in found["findings"]}
        dead_letters = next(f for f in found["findings"] if f["code"] == "DEAD_LETTERS")
        for job_id in [*dead_letters["job_ids"], order.id]:  # the order has steps
            answers.append(await mcp.ok("inspect_job", {"job_id": job_id}))
        answers.append(await mcp.ok("queue_stats"))
        waiting = next(f for f in found["findings"] if f["code"] == "RETRIES_WAITING")
        answers.append(await mcp.ok("retry_jobs", waiting["next_call"]["arguments"]))
        answers.append(await mcp.ok("retry_job", {"job_id": dead.id}))
        answers.append(await mcp.ok("wait_for_job", {"job_id": dead.id, "timeout_seconds": 0}))
        answers.append((await mcp.call("inspect_job", {"job_id": "0" * 32})).data)  # an error
        called = await _check_prompt(mcp, text, answers, {})
    assert called >= {"diagnose_queue", "inspect_job", "retry_job", "wait_for_job", "queue_stats"}
    # Every code the prompt names is a finding diagnose returned here, or an error a tool
    # answers (the database's own: DRIVER_UNAVAILABLE, STORAGE_FULL).
    named = set(CODE.findall(text))
    assert named - codes <= set(REGISTRY), named - codes - set(REGISTRY)
