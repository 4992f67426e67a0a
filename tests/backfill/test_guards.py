"""The pass is started by `Backfills.write` only: enqueued by name or rerun from a step it is
refused (JOB_INTERNAL, whose fix is the backfill's dry run), and a write starts no pass its own dry
run would refuse. A declaration's fix is a call that names each argument once."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Enqueue, JobRegistry, Jobs, Worker
from engine.backfill import PASS_JOB, BackfillRegistry, Backfills, backfill
from engine.errors import JobsError
from engine.fix_lines import as_raised
from tests.backfill.support import Customers


def _input(name: str = "normalize_emails") -> dict[str, Any]:
    return {"name": name, "run_id": "sneaky1", "environment": "production", "force": True}


async def _refused(call: Any, code: str) -> JobsError:
    with pytest.raises(JobsError) as caught:
        await call
    assert caught.value.code == code, caught.value.to_payload()
    return caught.value


async def test_the_pass_enqueued_by_name_is_refused_with_the_dry_run_as_its_fix(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    for call in (
        lambda: jobs.enqueue(PASS_JOB, _input()),
        lambda: jobs.enqueue_many([Enqueue(PASS_JOB, _input())]),
    ):
        refused = await _refused(call(), "JOB_INTERNAL")
        assert not refused.retryable
        assert refused.fix == as_raised(
            jobs.fix_context, "mcp-jobs backfill normalize_emails --json"
        )
        assert refused.next_call is not None
        assert refused.next_call.model_dump() == {
            "tool": "run_backfill",
            "arguments": {"name": "normalize_emails"},
        }
    # A name no shell word is quoted in the fix; no name at all: the listing.
    odd = await _refused(jobs.enqueue(PASS_JOB, _input("a b; rm")), "JOB_INTERNAL")
    assert odd.fix == as_raised(jobs.fix_context, "mcp-jobs backfill 'a b; rm' --json")
    bare = await _refused(jobs.enqueue(PASS_JOB, {}), "JOB_INTERNAL")
    assert bare.fix == as_raised(jobs.fix_context, "mcp-jobs backfill --json")
    assert bare.next_call is not None and bare.next_call.tool == "list_backfills"
    assert (await jobs.list()).jobs == [] and customers.remaining() == 25

    # The engine's own start still works: it enqueues the pass by its definition.
    start = await backfills.write("normalize_emails")
    assert (await jobs.get(start.job_id)).name == PASS_JOB


async def test_a_pass_is_not_rerun_from_a_step_but_a_dead_one_resumes(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry)
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    (run,) = await backfills.runs("normalize_emails")
    for step in ("start", "batch-1"):
        refused = await _refused(jobs.retry(start.job_id, from_step=step), "JOB_INTERNAL")
        assert refused.fix == as_raised(
            jobs.fix_context, "mcp-jobs backfill normalize_emails --json"
        )
        assert refused.details is not None and refused.details["job_id"] == start.job_id
    # The ledger keeps the run as it was recorded.
    assert await backfills.runs("normalize_emails") == [run]
    assert (await jobs.get(start.job_id)).state == "done"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"key": lambda row: object()}, "key(row)"),
        ({"count": "str"}, "count()"),
        ({"count": "neg"}, "count()"),
        ({"read": "none"}, "read()"),
    ],
)
async def test_a_write_starts_no_pass_its_dry_run_refuses(
    jobs: Jobs,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    change: dict[str, Any],
    field: str,
) -> None:
    async def count_str() -> Any:
        return "7"

    async def count_neg() -> int:
        return -1

    async def read_none(after: Any, limit: int) -> Any:
        return None

    functions: dict[str, Any] = {
        "count": customers.count,
        "read": customers.read,
        "key": lambda row: row["id"],
    }
    made = {"str": count_str, "neg": count_neg, "none": read_none}
    functions.update({k: made.get(v, v) if isinstance(v, str) else v for k, v in change.items()})
    backfill(name="bad", handle=customers.handle, registry=backfill_registry, **functions)

    planned = await _refused(backfills.dry_run("bad"), "BACKFILL_DECLARATION_INVALID")
    written = await _refused(backfills.write("bad"), "BACKFILL_DECLARATION_INVALID")
    for refused in (planned, written):
        assert refused.details is not None and refused.details["field"] == field
    assert (await jobs.list()).jobs == [] and await backfills.runs() == []


def test_a_refused_name_is_fixed_once_in_a_call_that_parses(customers: Customers) -> None:
    for name, mended in (("a b", '"a_b"'), (" ", None)):
        with pytest.raises(JobsError) as caught:
            backfill(
                name=name,
                count=customers.count,
                read=customers.read,
                key=lambda row: row["id"],
                handle=customers.handle,
                registry=BackfillRegistry(),
            )
        fix = caught.value.fix
        assert caught.value.code == "BACKFILL_DECLARATION_INVALID"
        assert fix.count("name=") == 1, fix
        if mended is not None:
            # `...` stands for the declaration's other arguments, as given.
            compile(fix.replace("...", "count=count"), "<fix>", "eval")
            assert f"name={mended}" in fix


async def test_an_unknown_name_is_not_answered_with_the_internal_pass_among_the_known(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    """JOB_UNKNOWN lists what may be enqueued: the pass, which never may be, is not offered,
    whether this process registers it or only a worker published it."""
    customers.declare(backfill_registry)
    await Worker(jobs).publish_descriptors()  # the pass among the published jobs
    elsewhere = Jobs(jobs.driver, registry=JobRegistry(), clock=jobs.clock)  # no app imported
    assert PASS_JOB in {d.name for d in await elsewhere.describe()}
    for client in (jobs, elsewhere):
        one = await _refused(client.enqueue("normalise_emails", {}), "JOB_UNKNOWN")
        many = await _refused(client.enqueue_many([Enqueue("normalise_emails", {})]), "JOB_UNKNOWN")
        for refused in (one, many):
            assert refused.details is not None and PASS_JOB not in refused.details["known"]
            assert PASS_JOB not in refused.cause
