"""Every caller value is checked against `engine.bounds` before a driver sees it: a hostile value
is INVALID_ARGUMENT (terminal, the argument named), the same on every driver, and nothing stored
changes. PostgreSQL used to refuse such values mid-statement as DRIVER_UNAVAILABLE (retryable,
"run db migrate"), SQLite stored them or failed INTERNAL, memory took anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from engine import Enqueue, JobContext, JobRegistry, Jobs, ManualClock, job
from engine.backfill import Backfills
from engine.backfill.registry import BackfillRegistry
from engine.bounds import DEFAULT_MAX_PAYLOAD_BYTES, MAX_DELAY_MS, PAYLOAD_ENV
from engine.client import connect
from engine.errors import JobsError


class Note(BaseModel):
    n: int
    text: str = ""
    ratio: float = 0.0


class KeyFunctionError(Exception):
    pass


def _failing_key(note: Note) -> str:
    raise KeyFunctionError(f"no key for {note.n}")


@pytest.fixture(autouse=True)
def declared_jobs(registry: JobRegistry) -> None:
    @job(idempotency_key=lambda i: f"note:{i.n}", registry=registry)
    async def note(input: Note, ctx: JobContext) -> None:
        return None

    # Keyed by the caller's text: the computed key is as hostile as the input.
    @job(idempotency_key=lambda i: i.text, registry=registry)
    async def keyed_by_text(input: Note, ctx: JobContext) -> None:
        return None

    @job(idempotency_key=_failing_key, registry=registry)
    async def unkeyable(input: Note, ctx: JobContext) -> None:
        return None


NUL = "a\x00b"
SURROGATE = "a\ud800b"
INT64_OVER = 2**63
YES: Any = "yes"  # a truthy str where a bool belongs
Call = Callable[[Jobs, str], Awaitable[Any]]


def _enqueue(job: Any = "note", input: Any = None, **kwargs: Any) -> Call:
    return lambda jobs, _seed: jobs.enqueue(job, input or {"n": 1}, **kwargs)


def _late_item(**kwargs: Any) -> Call:
    # The hostile item sits in a late part of a large batch: nothing of the batch may stay.
    def call(jobs: Jobs, _seed: str) -> Awaitable[Any]:
        items = [Enqueue("note", {"n": n}) for n in range(10, 310)]
        items[250] = Enqueue("note", {"n": 1}, **kwargs)
        return jobs.enqueue_many(items)

    return call


def _backfills(jobs: Jobs) -> Backfills:
    return Backfills(jobs, registry=BackfillRegistry(), environment="test")


def _text_cases(
    where: str, argument: str, make: Callable[[Any], Call], max_bytes: int, *, typed: bool = True
) -> list[Any]:
    """A case per hostile text for `argument` of `where`; `typed=False` leaves out the wrong
    type where the engine refused it already."""
    hostile: list[tuple[str, Any]] = [
        ("nul", NUL),
        ("surrogate", SURROGATE),
        ("over-long", "x" * (max_bytes + 1)),
        ("over-long-in-utf8", "é" * (max_bytes // 2 + 1)),
    ]
    if typed:
        hostile.append(("wrong-type", 5))
    return [
        pytest.param(make(v), argument, id=f"{where}-{argument}-{label}") for label, v in hostile
    ]


CASES: list[Any] = [
    # --- enqueue (a negative or NaN delay, a float run_at and a non-str tenant were refused
    # before bounds.py: they stay pinned by the enqueue tests, not repeated here) ---
    *_text_cases("enqueue", "job", lambda v: _enqueue(job=v), 200),
    *_text_cases("enqueue", "tenant_id", lambda v: _enqueue(tenant_id=v), 200, typed=False),
    *_text_cases("enqueue", "enqueued_by", lambda v: _enqueue(enqueued_by=v), 200),
    pytest.param(_enqueue(input={"n": 1, "text": NUL}), "input", id="input-nul"),
    pytest.param(_enqueue(input={"n": 1, "text": SURROGATE}), "input", id="input-surrogate"),
    pytest.param(
        _enqueue(input={"n": 1, "text": "x" * DEFAULT_MAX_PAYLOAD_BYTES}), "input", id="input-huge"
    ),
    pytest.param(
        _enqueue(job="keyed_by_text", input={"n": 1, "text": NUL}), "idempotency_key", id="key-nul"
    ),
    pytest.param(
        _enqueue(job="keyed_by_text", input={"n": 1, "text": "k" * 1025}),
        "idempotency_key",
        id="key-over-long",
    ),
    pytest.param(_enqueue(delay=1e308), "delay", id="delay-1e308"),
    pytest.param(_enqueue(delay=1e17), "delay", id="delay-1e17"),
    pytest.param(_enqueue(delay=True), "delay", id="delay-bool"),
    pytest.param(_enqueue(delay=INT64_OVER), "delay", id="delay-int64-over"),
    pytest.param(_enqueue(run_at=INT64_OVER), "run_at", id="run_at-int64-over"),
    pytest.param(_enqueue(run_at=-1), "run_at", id="run_at-negative"),
    pytest.param(
        lambda jobs, _s: jobs.enqueue(
            "note", {"n": 1}, run_at=jobs.clock.now_ms() + MAX_DELAY_MS + 1
        ),
        "run_at",
        id="run_at-beyond-ten-years",
    ),
    # --- enqueue_many ---
    pytest.param(_late_item(tenant_id=NUL), "tenant_id", id="many-late-tenant-nul"),
    pytest.param(_late_item(run_at=INT64_OVER), "run_at", id="many-late-run_at-int64-over"),
    pytest.param(_late_item(delay=1e308), "delay", id="many-late-delay-1e308"),
    pytest.param(lambda jobs, _s: jobs.enqueue_many("note"), "items", id="many-a-str"),
    pytest.param(lambda jobs, _s: jobs.enqueue_many([("note",)]), "items[0]", id="many-bad-item"),
    # --- id-addressed calls ---
    *_text_cases("get", "job_id", lambda v: lambda jobs, _s: jobs.get(v), 64),
    *_text_cases("trace", "job_id", lambda v: lambda jobs, _s: jobs.trace(v), 64),
    *_text_cases("cancel", "job_id", lambda v: lambda jobs, _s: jobs.cancel(v), 64),
    *_text_cases("retry", "job_id", lambda v: lambda jobs, _s: jobs.retry(v), 64),
    *_text_cases("get", "tenant_id", lambda v: lambda jobs, s: jobs.get(s, tenant_id=v), 200),
    *_text_cases("cancel", "tenant_id", lambda v: lambda jobs, s: jobs.cancel(s, tenant_id=v), 200),
    *_text_cases("cancel", "actor", lambda v: lambda jobs, s: jobs.cancel(s, actor=v), 200),
    *_text_cases("retry", "actor", lambda v: lambda jobs, s: jobs.retry(s, actor=v), 200),
    pytest.param(
        lambda jobs, s: jobs.retry(s, include_cancelled=YES),
        "include_cancelled",
        id="retry-include_cancelled-str",
    ),
    # --- list ---
    *_text_cases("list", "name", lambda v: lambda jobs, _s: jobs.list(name=v), 200),
    *_text_cases("list", "queue", lambda v: lambda jobs, _s: jobs.list(queue=v), 200),
    *_text_cases("list", "tenant_id", lambda v: lambda jobs, _s: jobs.list(tenant_id=v), 200),
    # Text that is not a cursor is CURSOR_INVALID (kit test_cursors); only a non-str is here.
    pytest.param(lambda jobs, _s: jobs.list(cursor=5), "cursor", id="list-cursor-wrong-type"),
    pytest.param(lambda jobs, _s: jobs.list(state=5), "state", id="list-state-int"),
    # --- stats, describe, events ---
    *_text_cases("stats", "queues", lambda v: lambda jobs, _s: jobs.stats([v]), 200),
    pytest.param(lambda jobs, _s: jobs.stats("emails"), "queues", id="stats-queues-a-str"),
    pytest.param(lambda jobs, _s: jobs.describe(NUL), "name", id="describe-name-nul"),
    pytest.param(
        lambda jobs, s: jobs.record_event("audit", job_id=s, data={"x": float("nan")}),
        "data",
        id="event-data-nan",
    ),
    pytest.param(lambda jobs, s: jobs.record_event(NUL, job_id=s), "kind", id="event-kind-nul"),
    # --- backfills (what run_backfill and list_backfills reach) ---
    pytest.param(lambda jobs, _s: _backfills(jobs).runs(NUL), "name", id="backfill-runs-nul"),
    pytest.param(
        lambda jobs, _s: _backfills(jobs).dry_run(SURROGATE),
        "name",
        id="backfill-dry-run-surrogate",
    ),
    pytest.param(
        lambda jobs, _s: _backfills(jobs).write("x" * 201), "name", id="backfill-write-over-long"
    ),
    pytest.param(
        lambda jobs, _s: _backfills(jobs).list(pending_only=YES),
        "pending_only",
        id="backfill-list-pending_only-str",
    ),
]


async def _stored(jobs: Jobs, seed: str) -> tuple[Any, ...]:
    """Every job row as it stands (state, attempt, times), and the seed job's events."""
    rows: list[tuple[Any, ...]] = []
    cursor: str | None = None
    while True:
        page = await jobs.list(limit=1000, cursor=cursor)
        rows += [(r.id, r.state, r.attempt, r.run_at, r.updated_at, r.tenant_id) for r in page.jobs]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    events = (await jobs.trace(seed)).events
    return tuple(sorted(rows)), len(events)


@pytest.mark.parametrize(("call", "argument"), CASES)
async def test_a_hostile_value_is_invalid_argument_and_changes_nothing(
    jobs: Jobs, call: Call, argument: str
) -> None:
    seed = (await jobs.enqueue("note", {"n": 0}, tenant_id="acme")).id
    before = await _stored(jobs, seed)
    with pytest.raises(JobsError) as raised:
        await call(jobs, seed)
    assert raised.value.code == "INVALID_ARGUMENT"
    assert raised.value.retryable is False
    assert raised.value.details is not None
    assert raised.value.details["argument"] == argument
    assert await _stored(jobs, seed) == before


@pytest.mark.parametrize("ratio", [float("nan"), 1e400, -1e400])
async def test_a_non_finite_number_in_the_input_is_job_input_invalid_at_its_field(
    jobs: Jobs, ratio: float
) -> None:
    """NaN or infinity in an input field (here a float with no bound) is the input's fault,
    named at the field as pydantic names it in a bounded one (engine.enqueue_items.input_size),
    not the storable rule's INVALID_ARGUMENT; nothing stored changes."""
    seed = (await jobs.enqueue("note", {"n": 0}, tenant_id="acme")).id
    before = await _stored(jobs, seed)
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("note", {"n": 1, "ratio": ratio})
    assert raised.value.code == "JOB_INPUT_INVALID" and raised.value.retryable is False
    assert raised.value.details is not None
    (entry,) = raised.value.details["errors"]
    assert entry == {
        "loc": ["ratio"],
        "msg": "Input should be a finite number",
        "type": "finite_number",
    }
    assert await _stored(jobs, seed) == before


async def test_an_error_in_the_key_function_is_idempotency_key_failed(jobs: Jobs) -> None:
    with pytest.raises(JobsError) as raised:
        await jobs.enqueue("unkeyable", {"n": 7})
    assert raised.value.code == "IDEMPOTENCY_KEY_FAILED"
    assert raised.value.retryable is False
    assert raised.value.details == {"job": "unkeyable", "exception": "KeyFunctionError"}
    assert isinstance(raised.value.__cause__, KeyFunctionError)
    assert (await jobs.list()).jobs == []


async def test_the_payload_bound_is_set_on_connect_and_by_the_environment(
    database_url: str, clock: ManualClock, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PAYLOAD_ENV, "64")
    small = {"n": 1, "text": "x" * 100}  # 125 bytes of JSON
    jobs = await connect(database_url, clock=clock, registry=registry)
    try:
        assert jobs.max_payload_bytes == 64
        await jobs.enqueue("note", {"n": 2, "text": "x" * 10})
        with pytest.raises(JobsError) as raised:
            await jobs.enqueue("note", small)
        assert raised.value.code == "INVALID_ARGUMENT"
        assert raised.value.details is not None
        assert raised.value.details["argument"] == "input"
    finally:
        await jobs.close()
    # An explicit bound wins over the environment.
    jobs = await connect(database_url, clock=clock, registry=registry, max_payload_bytes=4096)
    try:
        assert not (await jobs.enqueue("note", small)).deduped
    finally:
        await jobs.close()


@pytest.mark.parametrize(
    ("setting", "mended"),
    [("lots", 1 << 20), ("0", 1 << 20), ("-5", 1 << 20), (str(2**40), 1 << 27), ("1e6", 1 << 20)],
)
async def test_a_payload_bound_out_of_range_is_refused_before_connecting(
    setting: str, mended: int, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PAYLOAD_ENV, setting)
    with pytest.raises(JobsError) as raised:
        await connect("memory://", clock=clock)
    assert raised.value.code == "INVALID_ARGUMENT"
    assert raised.value.details is not None
    assert raised.value.details["argument"] == PAYLOAD_ENV
    # Only the variable sets it: the fix sets it, not a --help or prose.
    assert raised.value.fix == f"export {PAYLOAD_ENV}={mended}"


@pytest.mark.parametrize(
    ("field", "options"),
    [
        ("queue", {"queue": "q\x00"}),
        ("queue", {"queue": "q" * 201}),
        ("name", {"name": "n\ud800"}),
        ("name", {"name": "n" * 201}),
    ],
)
def test_a_declared_name_or_queue_out_of_bounds_is_refused_at_the_decorator(
    registry: JobRegistry, field: str, options: dict[str, Any]
) -> None:
    with pytest.raises(JobsError) as raised:

        @job(idempotency_key=lambda i: "k", registry=registry, **options)
        async def declared(input: Note, ctx: JobContext) -> None:
            return None

    assert raised.value.code == "JOB_DECLARATION_INVALID"
    assert raised.value.details is not None
    assert raised.value.details["field"] == field
