"""Reads: one job from the server; lists and stats from the replica once it has caught up
with the stream (`Replica.sync`), through the same rules the memory driver applies."""

from __future__ import annotations

from collections.abc import Sequence

from engine import paging
from engine.drivers.damage import named
from engine.drivers.nats import keys
from engine.drivers.nats.operator import found
from engine.drivers.nats.store import Store
from engine.rules import queue_stats
from schemas.jobs import JobFilter, JobPage, JobRecord
from schemas.stats import QueueStats
from schemas.trace import TracePage, TraceQuery


async def get(store: Store, job_id: str, tenant_id: str | None) -> JobRecord:
    held = await store.fresh_doc(job_id)
    return found(None if held is None else held[1], job_id, tenant_id).record


async def list_jobs(store: Store, filter: JobFilter) -> JobPage:
    """A page from the replica. A job key holding a value that is not a job document is named
    in an unfiltered list; a filtered one cannot tell whether it would match."""
    await store.replica.sync()
    records = (doc.record for _, doc in store.replica.docs())
    if (filter.states, filter.name, filter.queue, filter.tenant_id) != (None,) * 4:
        return paging.page_of(records, filter)
    unreadable = [
        named(key.removeprefix(keys.job("")), store.damaged(key, exc))
        for key, exc in list(store.replica.unreadable.items())
    ]
    return paging.page_of(records, filter, unreadable)


async def load_trace(
    store: Store, job_id: str, tenant_id: str | None, page: TraceQuery | None
) -> TracePage:
    held = await store.fresh_doc(job_id)
    doc = found(None if held is None else held[1], job_id, tenant_id)
    page = page or TraceQuery()
    # Start order; the position in the run (first-save order) breaks ties.
    steps = sorted(
        ((step.started_at, pos, step) for pos, step in enumerate(doc.run_steps(doc.record.run_id))),
        key=lambda t: (t[0], t[1]),
    )
    before_steps = (
        steps
        if page.steps_cursor is None
        else [
            t for t in steps if (t[0], t[1]) < paging.parse_step_cursor(page.steps_cursor, job_id)
        ]
    )
    step_page = before_steps[-page.steps_limit :]
    events = list(enumerate(doc.events))
    before_events = (
        events
        if page.events_cursor is None
        else [t for t in events if t[0] < paging.parse_event_cursor(page.events_cursor, job_id)]
    )
    event_page = before_events[-page.events_limit :]
    more_steps = len(before_steps) > len(step_page)
    more_events = len(before_events) > len(event_page)
    return TracePage(
        job=doc.record,
        steps=[t[2] for t in step_page],
        events=[e for _, e in event_page],
        steps_total=len(steps),
        events_total=len(events),
        steps_cursor=paging.step_cursor(job_id, *step_page[0][:2]) if more_steps else None,
        events_cursor=paging.event_cursor(job_id, event_page[0][0]) if more_events else None,
    )


async def stats(
    store: Store, queues: Sequence[str] | None, tenant_id: str | None
) -> list[QueueStats]:
    await store.replica.sync()
    rows = [doc.record for _, doc in store.replica.docs()]
    return queue_stats(rows, store.clock.now_ms(), queues=queues, tenant_id=tenant_id)
