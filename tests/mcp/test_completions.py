"""completion/complete over every driver and both protocol eras: the resource templates' and the
prompts' arguments complete from the engine, bounded, matched in any case (the values typed text
starts first, then those holding it), one tenant's under a pin."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Completion, PromptReference, ResourceTemplateReference

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.backfill import BackfillRegistry
from engine.testing.kit.test_descriptors import Charge, declare
from mcp_jobs.config import Settings
from mcp_jobs.server.completions import MAX_VALUES, RECENT_JOBS
from tests.backfill.support import Customers
from tests.mcp.conftest import OpenMcp
from tests.mcp.support import Caller

DESCRIPTOR = ResourceTemplateReference(uri="jobs://descriptors/{name}")
RUN = ResourceTemplateReference(uri="jobs://runs/{job_id}")
DIAGNOSE = PromptReference(name="diagnose_stalled_jobs")
BACKFILL = PromptReference(name="run_backfill_safely")


async def complete(
    mcp: Caller, ref: PromptReference | ResourceTemplateReference, name: str, value: str = ""
) -> Completion:
    return (await mcp.client.complete(ref, {"name": name, "value": value})).completion


async def test_the_capability_is_declared(open_mcp: OpenMcp) -> None:
    async with open_mcp() as mcp:
        assert mcp.client.server_capabilities.completions is not None


async def test_job_names_come_from_the_registry_and_published_descriptors(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    published = JobRegistry()
    declare(published)  # `charge`: only a worker has its code
    await Worker(Jobs(jobs.driver, registry=published, clock=clock)).publish_descriptors()
    async with open_mcp() as mcp:
        every = await complete(mcp, DESCRIPTOR, "name")
        assert every.values == ["charge", "flaky", "fulfil", "greet", "receipt"]
        assert (every.total, every.has_more) == (5, False)
        assert (await complete(mcp, DESCRIPTOR, "name", "f")).values == ["flaky", "fulfil"]
        assert (await complete(mcp, DESCRIPTOR, "name", "ch")).values == ["charge"]
        none = await complete(mcp, DESCRIPTOR, "name", "zz")
        assert (none.values, none.total, none.has_more) == ([], 0, False)
        # In any case, and from three letters a part of a name too: the names it starts first.
        assert (await complete(mcp, DESCRIPTOR, "name", "GR")).values == ["greet"]
        assert (await complete(mcp, DESCRIPTOR, "name", "fil")).values == ["fulfil"]
        assert (await complete(mcp, DESCRIPTOR, "name", "r")).values == ["receipt"]
        assert (await complete(mcp, DESCRIPTOR, "name", "ree")).values == ["greet"]


async def test_queues_complete_the_diagnose_prompt(jobs: Jobs, open_mcp: OpenMcp) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    async with open_mcp() as mcp:
        queues = await complete(mcp, DIAGNOSE, "queue")
        assert queues.values == ["catalog", "mail", "orders"]
        assert (await complete(mcp, DIAGNOSE, "queue", "ma")).values == ["mail"]
        assert (await complete(mcp, DIAGNOSE, "queue", "Ord")).values == ["orders"]


async def test_backfill_names_complete_the_backfill_prompt(
    backfill_registry: BackfillRegistry, customers: Customers, open_mcp: OpenMcp
) -> None:
    customers.declare(backfill_registry)
    customers.declare(backfill_registry, name="purge_bounces")
    async with open_mcp() as mcp:
        names = await complete(mcp, BACKFILL, "name")
        assert (names.values, names.total) == (["normalize_emails", "purge_bounces"], 2)
        assert (await complete(mcp, BACKFILL, "name", "pu")).values == ["purge_bounces"]


async def test_recent_job_ids_are_the_newest_and_prefix_matched(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    ids = [(await jobs.enqueue("greet", {"user_id": n})).id for n in range(1, RECENT_JOBS + 6)]
    newest_first = [j.id for j in (await jobs.list(limit=len(ids))).jobs]
    async with open_mcp() as mcp:
        recent = await complete(mcp, RUN, "job_id")
        # A hint for what was just enqueued, not a listing: the newest few, and "there is more".
        assert recent.values == newest_first[:RECENT_JOBS]
        assert (recent.total, recent.has_more) == (len(ids), True)
        one = ids[3]
        exact = await complete(mcp, RUN, "job_id", one)
        assert (exact.values, exact.total, exact.has_more) == ([one], 1, False)
        for prefix in (one[:2], one[:-4]):
            matching = await complete(mcp, RUN, "job_id", prefix)
            matched = [i for i in newest_first if i.startswith(prefix)]
            assert matching.values == matched[:RECENT_JOBS]
            assert matching.total == len(matched)


async def test_a_pinned_server_completes_only_its_tenants_jobs(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    mine = await jobs.enqueue("receipt", {"order_id": 1}, tenant_id="acme")
    theirs = await jobs.enqueue("receipt", {"order_id": 2}, tenant_id="globex")
    async with open_mcp(Settings(tenant="acme")) as mcp:
        assert (await complete(mcp, RUN, "job_id")).values == [mine.id]
        assert (await complete(mcp, RUN, "job_id", theirs.id)).values == []


async def test_at_most_a_hundred_values_with_an_honest_total(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    many = JobRegistry()
    for n in range(MAX_VALUES + 5):
        _declare_named(many, f"job_{n:03}")
    await Worker(Jobs(jobs.driver, registry=many, clock=clock)).publish_descriptors()
    async with open_mcp() as mcp:
        names = await complete(mcp, DESCRIPTOR, "name", "job_")
        assert len(names.values) == MAX_VALUES and names.values[0] == "job_000"
        assert (names.total, names.has_more) == (MAX_VALUES + 5, True)


def _declare_named(registry: JobRegistry, name: str) -> None:
    async def body(input: Charge, ctx: JobContext) -> None:
        return None

    job(idempotency_key=lambda i: f"{name}:{i.order_id}", name=name, registry=registry)(body)


@pytest.mark.parametrize(
    ("ref", "argument", "said"),
    [
        (ResourceTemplateReference(uri="jobs://nope/{x}"), "x", "completable"),
        (PromptReference(name="nope"), "queue", "completable"),
        (DIAGNOSE, "tenant", "it completes: queue"),
        (RUN, "name", "it completes: job_id"),
    ],
)
async def test_an_unknown_reference_or_argument_is_invalid_params(
    open_mcp: OpenMcp, ref: PromptReference | ResourceTemplateReference, argument: str, said: str
) -> None:
    async with open_mcp() as mcp:
        with pytest.raises(MCPError) as raised:
            await complete(mcp, ref, argument)
        assert raised.value.error.code == INVALID_PARAMS and said in raised.value.error.message


async def test_a_read_only_server_does_not_complete_the_prompt_it_does_not_serve(
    open_mcp: OpenMcp,
) -> None:
    async with open_mcp(Settings(read_only=True)) as mcp:
        with pytest.raises(MCPError) as raised:
            await complete(mcp, BACKFILL, "name")
        assert raised.value.error.code == INVALID_PARAMS
        assert (await complete(mcp, DIAGNOSE, "queue")).values == ["catalog", "mail", "orders"]
