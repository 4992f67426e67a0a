"""History that stays cheap to read: paged traces, filtered lists across live and settled rows,
and stats that count live rows, every dead/failed one and only recent done/cancelled ones."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, ManualClock, rules
from engine.drivers.base import AckWrite, StepWrite
from engine.errors import InvalidArgumentError
from engine.paging import MAX_TRACE_PAGE
from engine.retention import DEFAULT_POLICY, plan
from engine.testing.kit.test_retention import settle
from schemas.events import EventRecord
from schemas.jobs import EnqueueRequest, NackOptions
from schemas.states import SETTLED_STATES
from schemas.steps import StepRecord


def request(n: int, **fields: Any) -> EnqueueRequest:
    values: dict[str, Any] = {
        "id": f"job{n:04d}",
        "run_id": f"run{n:04d}",
        "name": "send",
        "queue": "default",
        "idempotency_key": f"k{n}",
        "input": {"n": n},
        "run_at": 0,
        "max_attempts": 3,
    }
    values.update(fields)
    return EnqueueRequest(**values)


async def _job_with_history(jobs: Jobs, clock: ManualClock, steps: int, events: int) -> str:
    driver = jobs.driver
    await driver.enqueue([request(1, run_at=clock.now_ms())])
    (held,) = await driver.claim("w1", 1, 60_000)
    for i in range(steps):
        # Every third step shares its start time with the one before: ties keep save order.
        started = clock.now_ms() + (i - i % 3 if i % 3 == 1 else i)
        step = StepRecord(
            job_id="job0001", run_id="run0001", name=f"s{i:03d}", status="completed",
            output={"i": i}, started_at=started, finished_at=started,
        )  # fmt: skip
        (outcome,) = await driver.save_steps_many([StepWrite("job0001", held.token, step)])
        assert outcome is None
    for i in range(events):
        await driver.record_event(
            EventRecord(job_id="job0001", at=clock.now_ms() + i, kind="note", data={"i": i})
        )
    return "job0001"


async def test_a_trace_answers_the_newest_page_and_cursors_walk_the_rest(
    jobs: Jobs, clock: ManualClock
) -> None:
    job_id = await _job_with_history(jobs, clock, steps=23, events=17)
    everything = await jobs.trace(job_id, steps_limit=MAX_TRACE_PAGE, events_limit=MAX_TRACE_PAGE)
    assert (everything.steps_total, everything.events_total) == (23, 17)
    assert everything.steps_cursor is None and everything.events_cursor is None
    in_order = [s.name for s in everything.steps]
    assert sorted(in_order, key=lambda n: (everything.steps[in_order.index(n)].started_at,)) == (
        in_order
    )
    assert [e.data for e in everything.events] == [{"i": i} for i in range(17)]

    first = await jobs.trace(job_id, steps_limit=5, events_limit=4)
    assert [s.name for s in first.steps] == in_order[-5:]
    assert [e.data for e in first.events] == [{"i": i} for i in range(13, 17)]
    assert (first.steps_total, first.events_total) == (23, 17)
    assert first.steps_cursor is not None and first.events_cursor is not None

    seen_steps: list[str] = []
    cursor: str | None = None
    while True:
        page = await jobs.trace(job_id, steps_limit=5, steps_cursor=cursor)
        seen_steps[:0] = [s.name for s in page.steps]
        cursor = page.steps_cursor
        if cursor is None:
            break
    assert seen_steps == in_order

    seen_events: list[Any] = []
    cursor = None
    while True:
        page = await jobs.trace(job_id, events_limit=4, events_cursor=cursor)
        seen_events[:0] = [e.data for e in page.events]
        cursor = page.events_cursor
        if cursor is None:
            break
    assert seen_events == [{"i": i} for i in range(17)]


async def test_a_trace_by_default_is_a_small_page(jobs: Jobs, clock: ManualClock) -> None:
    job_id = await _job_with_history(jobs, clock, steps=60, events=0)
    trace = await jobs.trace(job_id)
    assert len(trace.steps) == 50 and trace.steps_total == 60
    assert trace.steps_cursor is not None
    assert trace.events == [] and trace.events_total == 0 and trace.events_cursor is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"steps_limit": 0},
        {"events_limit": MAX_TRACE_PAGE + 1},
        {"steps_limit": True},
        {"steps_cursor": "nope"},
        {"steps_cursor": "1.x"},
        {"events_cursor": "-1"},
        {"events_cursor": "9" * 80},
    ],
)
async def test_a_bad_trace_page_is_a_typed_refusal(
    jobs: Jobs, clock: ManualClock, kwargs: dict[str, Any]
) -> None:
    job_id = await _job_with_history(jobs, clock, steps=1, events=1)
    with pytest.raises(InvalidArgumentError):
        await jobs.trace(job_id, **kwargs)


async def _settle(jobs: Jobs, how: str, job_id: str, token: str) -> None:
    driver = jobs.driver
    if how == "done":
        assert await driver.ack_many([AckWrite(job_id, token, None)]) == [None]
    elif how == "cancelled":
        await driver.cancel(job_id, None, "kit")
    else:
        options = NackOptions(dead_letter=how == "dead", fail=how == "failed")
        await driver.nack(job_id, token, options)


async def _one_of_each(jobs: Jobs, clock: ManualClock) -> dict[str, str]:
    """Jobs 1..4 settled done, cancelled, dead, failed; 5 ready; 6 delayed (names by state)."""
    driver = jobs.driver
    now = clock.now_ms()
    wanted = ("done", "cancelled", "dead", "failed")
    await driver.enqueue(
        [request(n + 1, name=f"n-{how}", run_at=now) for n, how in enumerate(wanted)]
    )
    held = {c.record.id: c.token for c in await driver.claim("w1", 10, 60_000)}
    ids: dict[str, str] = {}
    for n, how in enumerate(wanted):
        job_id = f"job{n + 1:04d}"
        await _settle(jobs, how, job_id, held[job_id])
        ids[how] = job_id
    await driver.enqueue(
        [
            request(5, name="n-ready", run_at=now, tenant_id="acme"),
            request(6, name="n-delayed", run_at=now + 10_000, queue="later"),
        ]
    )
    return {**ids, "ready": "job0005", "delayed": "job0006"}


async def test_every_settled_state_has_its_finish_time(jobs: Jobs, clock: ManualClock) -> None:
    ids = await _one_of_each(jobs, clock)
    for state in SETTLED_STATES:
        record = await jobs.get(ids[state])
        assert record.state == state and record.finished_at == clock.now_ms()


async def test_filtered_lists_merge_live_and_settled_rows_newest_first(
    jobs: Jobs, clock: ManualClock
) -> None:
    ids = await _one_of_each(jobs, clock)
    every = [j.id for j in (await jobs.list(limit=100)).jobs]
    assert every == sorted(ids.values(), reverse=True)
    assert [j.id for j in (await jobs.list(state="dead")).jobs] == [ids["dead"]]
    assert [j.id for j in (await jobs.list(state=["ready", "done"])).jobs] == [
        ids["ready"],
        ids["done"],
    ]
    assert [j.id for j in (await jobs.list(name="n-failed")).jobs] == [ids["failed"]]
    assert [j.id for j in (await jobs.list(queue="later")).jobs] == [ids["delayed"]]
    assert [j.id for j in (await jobs.list(tenant_id="acme")).jobs] == [ids["ready"]]
    assert (await jobs.list(name="nosuch")).jobs == []
    assert (await jobs.list(state="dead", name="n-done")).jobs == []
    assert (await jobs.list(state="suspended", queue="default")).jobs == []
    # Two to a page across the arms: the cursor walks every row once, newest first.
    walked: list[str] = []
    cursor: str | None = None
    while True:
        page = await jobs.list(queue="default", limit=2, cursor=cursor)
        walked += [j.id for j in page.jobs]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert walked == sorted((v for k, v in ids.items() if k != "delayed"), reverse=True)


async def test_stats_count_done_and_cancelled_of_the_recent_window_only(
    jobs: Jobs, clock: ManualClock
) -> None:
    await _one_of_each(jobs, clock)
    (default, later) = await jobs.stats()
    assert (default.done, default.cancelled, default.dead, default.failed) == (1, 1, 1, 1)
    assert (default.ready, later.delayed) == (1, 1)
    clock.advance(rules.RECENT_SETTLED_MS)
    (default, later) = await jobs.stats()
    assert (default.done, default.cancelled, default.dead, default.failed) == (1, 1, 1, 1)
    clock.advance(1)
    (default, later) = await jobs.stats()
    # History past the window is not counted; dead and failed always are; live rows are.
    assert (default.done, default.cancelled, default.dead, default.failed) == (0, 0, 1, 1)
    assert (default.ready, later.ready) == (1, 1)
    assert await jobs.stats(tenant_id="acme") == [
        rules.queue_stats([await jobs.get("job0005")], clock.now_ms())[0]
    ]


async def test_stats_count_at_most_the_cap_of_recent_rows_and_say_their_window(
    jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However fast jobs finish, the stats read a bounded number of settled rows: past
    RECENT_SETTLED_CAP rows of a recent state, the window starts at the finish time of its
    cap-th newest (rows sharing that time count too, as one ack batch's do) and
    `settled_window_ms` says how long it is. The window is the whole history's: a queue or
    tenant filter chooses which rows in it count, so a queue reads the same alone as among
    all."""
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 3)
    driver = jobs.driver
    start = clock.now_ms()
    settles = [  # (how, ms after start, queue)
        ("done", 0, "default"),
        ("cancelled", 5, "default"),
        ("done", 10, "b"),
        ("done", 20, "default"),
        ("done", 20, "default"),
        ("done", 20, "default"),
        ("cancelled", 25, "default"),
        ("done", 30, "default"),
    ]
    await driver.enqueue(
        [request(n + 1, queue=queue, run_at=start) for n, (_, _, queue) in enumerate(settles)]
    )
    held = {c.record.id: c.token for c in await driver.claim("w1", 20, 600_000)}
    ids = [f"job{n + 1:04d}" for n in range(len(settles))]

    async def settle(upto: int) -> None:
        for job_id, (how, at, _) in list(zip(ids, settles, strict=True))[:upto]:
            if (await jobs.get(job_id)).state == "running":
                clock.set(start + at)
                await _settle(jobs, how, job_id, held[job_id])

    async def read(queues: list[str] | None = None) -> list[tuple[str, int, int, int]]:
        found = await jobs.stats(queues)
        records = [await jobs.get(i) for i in ids]
        assert found == rules.queue_stats(records, clock.now_ms(), queues=queues)
        return [(s.queue, s.done, s.cancelled, s.settled_window_ms) for s in found]

    await settle(7)  # done at 0, 10 (queue b), 20, 20, 20; cancelled at 5, 25
    # Done's 3rd newest finished at 20: the window starts there (5 ms before now).
    assert await read() == [("default", 3, 1, 5)]
    assert await read(["default"]) == [("default", 3, 1, 5)]
    # Queue b's one done row (at 10) is older than the window, asked alone or among all.
    assert await read(["b"]) == []
    assert await jobs.stats(tenant_id="nobody") == []
    await settle(8)  # and done at 30: the 3rd newest is still at 20, and the rows tied with it
    assert await read() == [("default", 4, 1, 10)]
    assert await read(["default"]) == [("default", 4, 1, 10)]
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 1_000)
    assert await read() == [
        ("b", 1, 0, rules.RECENT_SETTLED_MS),
        ("default", 5, 2, rules.RECENT_SETTLED_MS),
    ]


async def test_an_events_cursor_stays_valid_across_a_prune(jobs: Jobs, clock: ManualClock) -> None:
    driver = jobs.driver
    old = await settle(driver, "dead", name="old")
    for _ in range(5):
        await driver.record_event(EventRecord(job_id=old.id, at=clock.now_ms(), kind="note"))
    clock.advance(31 * 86_400_000)
    job_id = await _job_with_history(jobs, clock, steps=0, events=10)
    first = await jobs.trace(job_id, events_limit=4)
    seen = [e.data for e in first.events]
    pruned = await driver.prune(plan(DEFAULT_POLICY, clock.now_ms()), 100)
    assert sum(c.rows for c in pruned) == 1  # the old job and its events are gone
    cursor = first.events_cursor
    while cursor is not None:
        page = await jobs.trace(job_id, events_limit=4, events_cursor=cursor)
        seen[:0] = [e.data for e in page.events]
        cursor = page.events_cursor
    assert seen == [{"i": i} for i in range(10)]
