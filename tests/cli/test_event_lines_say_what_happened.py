"""`jobs show` (text) says what each event of the job means, from its data: the attempt and the
worker a lost lease took and the worker that took the job over, the error an attempt failed
with, when a parked job wakes, the state a cancel or retry left. Before, a lost lease read
`lease_expired by <the worker that took over>`, the one that lost it named nowhere."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Retry, Worker, connect, job
from mcp_jobs.cli.render import EVENT_TEXT, event_summary
from tests.cli.support import run

AT = 1_796_000_000_000  # 2026-11-30 00:53:20 UTC
LEASE_MS = 30_000
KILLED, RESCUER = "vm:23140:906044", "vm:23141:096905"


class Item(BaseModel):
    n: int


def _lost_then_dead(url: str) -> str:
    """A job whose first attempt's worker vanished (kill -9: it never settles), taken over by
    another worker once the lease ran out, whose attempt fails with a long error: dead."""

    async def build() -> str:
        registry = JobRegistry()

        @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=2), registry=registry)
        async def work(input: Item, ctx: JobContext) -> None:
            raise RuntimeError("boom " * 60)

        clock = ManualClock(AT)
        jobs = await connect(url, registry=registry, clock=clock)
        try:
            made = await jobs.enqueue(work, {"n": 1})
            (held,) = await jobs.driver.claim(KILLED, 1, lease_ms=LEASE_MS)
            assert held.lease_expires_at == AT + LEASE_MS
            clock.advance(LEASE_MS + 7_000)
            assert await Worker(jobs, worker_id=RESCUER).run_until_idle() == 1
            return made.id
        finally:
            await jobs.close()

    return anyio.run(build)


def test_a_lost_lease_names_its_attempt_and_worker_and_the_one_that_took_over(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _lost_then_dead(url)
    capsys.readouterr()  # the worker's own lines
    code, shown = run(capsys, "jobs", "show", job_id, "--database-url", url)
    assert code == 0, shown
    events = [line for line in shown.splitlines() if line.startswith("  event ")]
    assert events == [
        f"  event 2026-11-30 00:53:57 UTC lease_expired: attempt 1 held by {KILLED} "
        f"(lease ran out 00:53:50 UTC), taken over by {RESCUER}",
        f"  event 2026-11-30 00:53:57 UTC dead: attempt 2 failed: {events[1][-EVENT_TEXT:]}",
    ]
    # The error is cut: the whole of it is in --json.
    assert events[1].endswith("…") and events[1][-EVENT_TEXT:].startswith("JOB_FAILED: ")


ERROR = {"code": "UNKNOWN_JOB", "title": "t", "cause": "no job named x here", "fix": "f"}


@pytest.mark.parametrize(
    ("event", "line"),
    [
        pytest.param(
            {"kind": "failed", "data": {"attempt": 3, "error": ERROR}},
            "failed: attempt 3 failed: UNKNOWN_JOB: no job named x here",
            id="failed",
        ),
        pytest.param(
            {"kind": "dead", "data": {"error": ERROR}},
            "dead: UNKNOWN_JOB: no job named x here",
            id="buried-without-attempt",
        ),
        pytest.param(
            {"kind": "parked", "data": {"until": AT, "reason": ERROR}},
            "parked: until 2026-11-30 00:53:20 UTC, UNKNOWN_JOB: no job named x here",
            id="parked-unknown-name",
        ),
        pytest.param(
            {"kind": "parked", "data": {"until": AT, "reason": None}},
            "parked: until 2026-11-30 00:53:20 UTC",
            id="parked-asleep",
        ),
        pytest.param(
            {"kind": "cancelled", "actor": "mcp:cancel_job", "data": {"from": "running"}},
            "cancelled: from running by mcp:cancel_job",
            id="cancelled",
        ),
        pytest.param(
            {"kind": "requeued", "actor": "cli", "data": {"from": "dead"}},
            "requeued: from dead by cli",
            id="retried-by-hand",
        ),
        pytest.param(
            {
                "kind": "requeued",
                "actor": "cli",
                "data": {"from": "done", "from_step": "s2", "previous_run_id": "A", "run_id": "B"},
            },
            "requeued: from done, rerun from step 's2' (run A -> B) by cli",
            id="rerun",
        ),
        pytest.param(
            {"kind": "handed_back", "actor": KILLED, "data": {"attempt": 1, "error": None}},
            f"handed_back: attempt 1 by {KILLED}",
            id="handed-back",
        ),
        pytest.param(
            {
                "kind": "lease_expired",
                "actor": RESCUER,
                "data": {"attempt": 2, "worker_id": KILLED, "lease_expires_at": AT - 86_400_000},
            },
            f"lease_expired: attempt 2 held by {KILLED} (lease ran out 2026-11-29 00:53:20 UTC), "
            f"taken over by {RESCUER}",
            id="lease-ran-out-the-day-before",
        ),
        pytest.param({"kind": "note", "actor": "cli"}, "note by cli", id="no-data"),
        pytest.param(
            {"kind": "dead", "data": {"why": "by hand"}},
            'dead: {"why": "by hand"}',
            id="recorded-by-hand-as-json",
        ),
    ],
)
def test_each_event_kind_says_its_data(event: dict[str, object], line: str) -> None:
    assert event_summary({"at": AT, **event}) == line


def test_a_long_or_unruly_datum_stays_on_one_bounded_line() -> None:
    late = {"late_ms": 12_345, "lease_ms": 30_000, "cause": "blocked " * 50}
    said = event_summary({"at": AT, "kind": "heartbeat_late", "actor": KILLED, "data": late})
    assert said.startswith("heartbeat_late: the heartbeat ran 12.3 s late (a lease is 30.0 s): ")
    assert said.endswith(f"… by {KILLED}") and len(said) < 200
    recorded = {"at": AT, "kind": "audit\x1b[31m", "data": {"text": "a\nb" * 100}}
    said = event_summary(recorded)
    assert "\n" not in said and "\x1b" not in said and len(said) < 120
