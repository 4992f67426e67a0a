"""Reads: one job, a page of jobs, a job's trace page."""

from __future__ import annotations

from engine import paging
from engine.drivers.redis.codec import decode_record
from engine.drivers.redis.operator import find
from engine.drivers.redis.steps import ordered_steps
from engine.drivers.redis.store import Store
from schemas.events import EventRecord
from schemas.jobs import JobFilter, JobPage, JobRecord
from schemas.trace import TracePage, TraceQuery

# Ids read per round trip while a filtered page is being filled.
_LIST_BATCH = 200


async def get(store: Store, job_id: str, tenant_id: str | None) -> JobRecord:
    return (await find(store, job_id, tenant_id))[0]


def _wanted(job: JobRecord, f: JobFilter) -> bool:
    return (
        (f.states is None or job.state in f.states)
        and (f.name is None or job.name == f.name)
        and (f.queue is None or job.queue == f.queue)
        and (f.tenant_id is None or job.tenant_id == f.tenant_id)
    )


async def list_jobs(store: Store, f: JobFilter) -> JobPage:
    """Newest first: the ids' lexical order, walked down from the cursor in batches."""
    found: list[JobRecord] = []
    upper = "+" if f.cursor is None else f"({f.cursor}"
    while len(found) <= f.limit:
        ids = await store.zrevrangebylex(store.keys.ids, upper, _LIST_BATCH)
        if not ids:
            break
        rows = await store.hgetall_many([store.keys.job(i) for i in ids])
        found.extend(j for j in (decode_record(r) for r in rows if r) if _wanted(j, f))
        upper = f"({ids[-1]}"
    page = found[: f.limit]
    more = len(found) > f.limit
    return JobPage(jobs=page, next_cursor=page[-1].id if more and page else None)


async def load_trace(
    store: Store, job_id: str, tenant_id: str | None, page: TraceQuery | None
) -> TracePage:
    job = await get(store, job_id, tenant_id)
    page = page or TraceQuery()
    steps = await ordered_steps(store, job.run_id)
    before_steps = (
        steps
        if page.steps_cursor is None
        else [t for t in steps if (t[0], t[1]) < paging.parse_step_cursor(page.steps_cursor)]
    )
    step_page = before_steps[-page.steps_limit :]
    key = store.keys.events(job_id)
    top = (
        "+inf"
        if page.events_cursor is None
        else f"({paging.parse_event_cursor(page.events_cursor)}"
    )
    raw = await store.zrevrangebyscore(key, top, page.events_limit)
    events = [_event(member) for member in reversed(raw)]
    total = int(await store.client.zcard(key))
    more_events = (
        bool(events) and int(await store.client.zcount(key, "-inf", f"({events[0][0]}")) > 0
    )
    more_steps = len(before_steps) > len(step_page)
    return TracePage(
        job=job,
        steps=[t[2] for t in step_page],
        events=[e for _, e in events],
        steps_total=len(steps),
        events_total=total,
        steps_cursor=paging.step_cursor(*step_page[0][:2]) if more_steps else None,
        events_cursor=paging.event_cursor(events[0][0]) if more_events else None,
    )


def _event(member: str) -> tuple[int, EventRecord]:
    seq, _, text = member.partition("|")
    return int(seq), EventRecord.model_validate_json(text)
