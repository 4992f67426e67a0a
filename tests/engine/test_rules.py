"""The pure job rules (engine/rules.py): one home each, pinned here case by case."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from engine import rules
from schemas.jobs import JobRecord, NackOptions
from schemas.states import JOB_STATES, JobState
from schemas.stats import QueueStats

NOW = 1_000_000


def _job(state: JobState = "running", **fields: object) -> JobRecord:
    base: dict[str, object] = {
        "id": "j1",
        "run_id": "r1",
        "name": "send",
        "queue": "default",
        "tenant_id": None,
        "idempotency_key": "k",
        "input": {},
        "state": state,
        "attempt": 2,
        "max_attempts": 5,
        "run_at": NOW - 500,
        "queued_at": NOW - 900,
        "created_at": NOW - 1000,
        "updated_at": NOW - 100,
        "worker_id": "w1" if state == "running" else None,
        "lease_expires_at": NOW + 30_000 if state == "running" else None,
    }
    base.update(fields)
    return JobRecord.model_validate(base)


def every_nack() -> list[NackOptions]:
    """Every combination of the flags that steer a nack, with and without delay and error."""
    return [
        NackOptions(
            delay_ms=delay,
            error=error,
            counts_as_attempt=counts,
            park=park,
            dead_letter=dead,
            fail=fail,
        )
        for delay, error, counts, park, dead, fail in itertools.product(
            (0, 5_000, -5),
            (None, _error()),
            (True, False),
            (True, False),
            (True, False),
            (True, False),
        )
    ]


def _error() -> Any:
    # The field's type is what NackOptions declares (a structured error, or text before it).
    field = NackOptions.model_fields["error"]
    annotation = str(field.annotation)
    if "ErrorPayload" in annotation:
        from schemas.errors import ErrorPayload

        return ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="f", retryable=True)
    return "RuntimeError: boom"


def test_dedupe_key_folds_a_null_tenant_to_empty() -> None:
    assert rules.dedupe_key("send", None, "k") == ("send", "", "k")
    assert rules.dedupe_key("send", "", "k") == rules.dedupe_key("send", None, "k")
    assert rules.dedupe_key("send", "acme", "k") == ("send", "acme", "k")
    assert rules.dedupe_key("send", "acme", "k") != rules.dedupe_key("mail", "acme", "k")


def test_live_states_hold_the_key_and_settled_ones_do_not() -> None:
    assert set(rules.LIVE_STATES) == {"ready", "delayed", "running", "suspended"}
    assert set(rules.WAITING_STATES) == set(rules.LIVE_STATES) - {"running"}


@pytest.mark.parametrize("state", JOB_STATES)
def test_a_claim_takes_due_waiting_rows_and_expired_leases_only(state: JobState) -> None:
    due = _job(state, run_at=NOW, lease_expires_at=NOW)
    later = _job(state, run_at=NOW + 1, lease_expires_at=NOW + 1)
    expected = state in ("ready", "delayed", "suspended", "running")
    assert rules.is_claimable(due, NOW) is expected
    assert rules.is_claimable(later, NOW) is False


def test_a_running_row_without_a_lease_is_not_claimable() -> None:
    assert rules.is_claimable(_job("running", lease_expires_at=None), NOW) is False


def test_a_claim_runs_the_row_under_a_new_lease_one_attempt_more() -> None:
    job = _job("ready", cancel_requested=True)
    claimed = rules.claim_transition(job, "w9", NOW, 30_000)
    assert claimed.state == "running"
    assert claimed.attempt == job.attempt + 1
    assert claimed.worker_id == "w9"
    assert claimed.lease_expires_at == NOW + 30_000
    assert claimed.cancel_requested is False
    assert claimed.updated_at == NOW
    assert (claimed.run_at, claimed.queued_at) == (job.run_at, job.queued_at)


def test_an_ack_settles_done_keeps_output_unless_given_and_clears_the_error() -> None:
    job = _job(output={"old": 1}, last_error=_error())
    acked = rules.ack_transition(job, NOW, {"new": 2})
    assert acked.state == "done"
    assert acked.output == {"new": 2}
    assert acked.last_error is None
    assert (acked.finished_at, acked.updated_at) == (NOW, NOW)
    assert (acked.worker_id, acked.lease_expires_at) == (None, None)
    assert rules.ack_transition(job, NOW, None).output == {"old": 1}


def _expected_state(o: NackOptions) -> JobState:
    if o.dead_letter:
        return "dead"
    if o.fail:
        return "failed"
    if o.park:
        return "suspended"
    shed = not o.counts_as_attempt
    return "delayed" if o.delay_ms > 0 and not shed else "ready"


@pytest.mark.parametrize("options", every_nack())
def test_a_nack_moves_the_row_by_its_flags(options: NackOptions) -> None:
    outcome = rules.nack_transition(options, NOW, attempt=3, queued_at=NOW - 900)
    assert outcome.state == _expected_state(options)
    assert outcome.state == rules.nack_state(options)
    assert outcome.attempt == (3 if options.counts_as_attempt else 2)
    assert outcome.replaces_error is (options.error is not None)
    settled = outcome.state in ("dead", "failed")
    if settled:
        assert (outcome.run_at, outcome.finished_at) == (None, NOW)
        assert outcome.queued_at == NOW - 900 and outcome.keeps_queued_at
    elif rules.is_shed(options) and options.delay_ms <= 0:
        # Handed back unstarted with no delay: run_at kept, so its place in line.
        assert (outcome.run_at, outcome.finished_at) == (None, None)
        assert outcome.queued_at == NOW - 900 and outcome.keeps_queued_at
    else:
        assert outcome.run_at == NOW + max(0, options.delay_ms)
        assert outcome.finished_at is None
        assert outcome.keeps_queued_at is rules.is_shed(options)
        assert outcome.queued_at == (NOW - 900 if outcome.keeps_queued_at else outcome.run_at)


def test_a_shed_stays_ready_keeps_its_place_and_burns_no_attempt() -> None:
    shed = NackOptions(delay_ms=5_000, counts_as_attempt=False)
    assert rules.is_shed(shed)
    outcome = rules.nack_transition(shed, NOW, attempt=1, queued_at=NOW - 900)
    assert (outcome.state, outcome.attempt, outcome.queued_at) == ("ready", 0, NOW - 900)
    assert outcome.event is None


def test_a_park_suspends_and_is_not_a_shed() -> None:
    park = NackOptions(delay_ms=5_000, counts_as_attempt=False, park=True)
    assert not rules.is_shed(park)
    outcome = rules.nack_transition(park, NOW, attempt=1, queued_at=NOW - 900)
    assert (outcome.state, outcome.attempt, outcome.queued_at) == ("suspended", 0, NOW + 5_000)


def test_a_nack_never_takes_the_attempt_below_zero() -> None:
    assert rules.nack_attempt(0, counts_as_attempt=False) == 0
    assert rules.nack_attempt(0, counts_as_attempt=True) == 0
    assert rules.nack_attempt(4, counts_as_attempt=False) == 3


@pytest.mark.parametrize("options", every_nack())
def test_the_event_kind_of_a_nack(options: NackOptions) -> None:
    kind = rules.event_kind_for(options)
    state = rules.nack_state(options)
    if state in ("dead", "failed"):
        assert kind == state
    elif options.park:
        assert kind == "parked"
    elif options.error is not None:
        assert kind == "retried"
    else:
        assert kind is None
    assert rules.nack_transition(options, NOW, 1, NOW).event == kind


def test_the_event_data_of_a_nack() -> None:
    error = _error()
    parked = NackOptions(delay_ms=10, park=True, counts_as_attempt=False, error=error)
    data = rules.nack_event_data(parked, held_attempt=2, run_at=NOW + 10)
    assert data["until"] == NOW + 10 and set(data) == {"until", "reason"}
    retried = NackOptions(delay_ms=10, error=error)
    data = rules.nack_event_data(retried, held_attempt=2, run_at=NOW + 10)
    assert data["attempt"] == 2 and set(data) == {"attempt", "error"}
    # The event data is plain JSON whatever the error's type.
    assert isinstance(data["error"], str | dict)


@pytest.mark.parametrize("options", every_nack())
def test_apply_nack_writes_the_outcome_to_the_row(options: NackOptions) -> None:
    job = _job(last_error=None)
    record = rules.apply_nack(job, options, NOW)
    outcome = rules.nack_transition(options, NOW, job.attempt, job.queued_at)
    assert (record.state, record.attempt, record.queued_at) == (
        outcome.state,
        outcome.attempt,
        outcome.queued_at,
    )
    assert record.run_at == (job.run_at if outcome.run_at is None else outcome.run_at)
    assert record.finished_at == outcome.finished_at
    assert record.last_error == options.error
    assert (record.worker_id, record.lease_expires_at, record.updated_at) == (None, None, NOW)


def test_a_nack_without_an_error_keeps_the_last_one() -> None:
    job = _job(last_error=_error())
    assert rules.apply_nack(job, NackOptions(delay_ms=5), NOW).last_error == job.last_error


@pytest.mark.parametrize("state", JOB_STATES)
def test_only_live_jobs_cancel(state: JobState) -> None:
    assert rules.can_cancel(state) is (state in ("ready", "delayed", "running", "suspended"))


@pytest.mark.parametrize("state", ["ready", "running"])
def test_a_cancel_tells_only_a_running_job_to_stop(state: JobState) -> None:
    cancelled = rules.cancel_transition(_job(state), NOW)
    assert cancelled.state == "cancelled"
    assert cancelled.cancel_requested is (state == "running")
    assert (cancelled.finished_at, cancelled.updated_at) == (NOW, NOW)
    assert rules.cancel_event_data(state) == {"from": state}


@pytest.mark.parametrize(
    ("state", "include_cancelled"), list(itertools.product(JOB_STATES, (True, False)))
)
def test_a_retry_takes_failed_dead_and_delayed_and_cancelled_only_when_asked(
    state: JobState, include_cancelled: bool
) -> None:
    allowed = state in ("failed", "dead", "delayed") or (include_cancelled and state == "cancelled")
    assert rules.can_retry(state, include_cancelled) is allowed


def test_a_retry_requeues_ready_now_from_attempt_zero_in_the_same_run() -> None:
    job = _job("dead", attempt=5, finished_at=NOW - 10, cancel_requested=True, last_error=_error())
    again = rules.retry_transition(job, NOW)
    assert (again.state, again.attempt, again.run_at, again.queued_at) == ("ready", 0, NOW, NOW)
    assert (again.finished_at, again.cancel_requested) == (None, False)
    assert (again.worker_id, again.lease_expires_at) == (None, None)
    assert again.run_id == job.run_id
    assert again.last_error == job.last_error
    assert rules.retry_event_data("dead") == {"from": "dead"}


@pytest.mark.parametrize("state", JOB_STATES)
def test_the_stats_bucket_is_the_state_but_a_due_delayed_row_is_ready(state: JobState) -> None:
    due = rules.stats_bucket(_job(state, run_at=NOW), NOW)
    later = rules.stats_bucket(_job(state, run_at=NOW + 1), NOW)
    assert due == ("ready" if state == "delayed" else state)
    assert later == state


def test_queue_stats_count_buckets_ages_expired_leases_and_overdue_sleepers() -> None:
    jobs = [
        _job("ready", id="a", queued_at=NOW - 700, run_at=NOW + 5_000),  # a shed: ready, aging
        _job("delayed", id="b", run_at=NOW - 100, queued_at=NOW - 100),
        _job("delayed", id="c", run_at=NOW + 100, queued_at=NOW + 100),
        _job("running", id="d", lease_expires_at=NOW),
        _job("running", id="e", lease_expires_at=NOW + 1),
        _job("suspended", id="f", run_at=NOW - 300),
        _job("suspended", id="g", run_at=NOW + 300),
        _job("dead", id="h", queue="other"),
    ]
    default, other = rules.queue_stats(jobs, NOW)
    assert default.queue == "default" and other.queue == "other"
    assert (default.ready, default.delayed, default.running, default.suspended) == (2, 1, 2, 2)
    assert default.oldest_ready_ms == 700
    assert default.expired_leases == 1
    assert (default.due_suspended, default.oldest_due_suspended_ms) == (1, 300)
    assert (other.dead, other.ready, other.oldest_ready_ms) == (1, 0, 0)


HOUR_AGO = NOW - rules.RECENT_SETTLED_MS


@pytest.mark.parametrize(
    ("done", "cancelled", "since"),
    [
        ([], [], HOUR_AGO),  # nothing recent: the whole hour
        ([NOW - 1, NOW - 2, NOW - 3], [NOW], HOUR_AGO),  # at the cap: still the hour
        ([NOW - 1, NOW - 2, NOW - 3, NOW - 4], [], NOW - 3),  # past it: from the 3rd newest
        ([NOW, NOW - 5, NOW - 5, NOW - 5], [], NOW - 5),  # a tie there: every tied row counts
        ([NOW - 1, NOW - 2, NOW - 3, NOW - 4], [NOW, NOW, NOW, NOW], NOW),  # the later edge wins
        ([NOW + 9, NOW + 8, NOW + 7, NOW + 6], [], NOW + 7),  # a worker clock ahead: window 0
    ],
)
def test_the_recent_window_starts_at_the_cap_th_newest_row_of_a_state_past_the_cap(
    done: list[int], cancelled: list[int], since: int
) -> None:
    edges = [rules.recent_settled_edge(times, 3) for times in (done, cancelled)]
    assert rules.recent_settled_since(edges, NOW) == since
    assert rules.settled_window_ms(since, NOW) == max(NOW - since, 0)


def test_queue_stats_count_the_recent_window_and_say_how_long_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 2)
    jobs = [
        _job("done", id=f"d{n}", finished_at=NOW - 10 * n, queue=f"q{n % 2}", tenant_id=f"t{n}")
        for n in range(6)
    ] + [
        _job("cancelled", id="c", finished_at=NOW - 15, queue="q0"),
        _job("done", id="old", finished_at=HOUR_AGO - 1, queue="q0"),
    ]
    # Done past the cap of 2: the window starts at the 2nd newest (NOW - 10).
    q0, q1 = rules.queue_stats(jobs, NOW)
    assert (q0.done, q0.cancelled, q0.settled_window_ms) == (1, 0, 10)
    assert (q1.done, q1.cancelled, q1.settled_window_ms) == (1, 0, 10)
    # The window is the whole history's: queue q0 alone (done at NOW, NOW - 20, NOW - 40,
    # cancelled at NOW - 15) reads as it does among all, and so does a tenant's share.
    assert rules.queue_stats(jobs, NOW, queues=["q0"]) == [q0]
    assert rules.queue_stats(jobs, NOW, queues=["q0", "nowhere"]) == [q0]
    assert rules.queue_stats(jobs, NOW, tenant_id="nobody") == []
    # Tenant t2's one row (NOW - 20) is older than the window; t0's (NOW) is in it.
    assert rules.queue_stats(jobs, NOW, tenant_id="t2") == []
    assert rules.queue_stats(jobs, NOW, tenant_id="t0") == [
        QueueStats(queue="q0", done=1, settled_window_ms=10)
    ]


def test_recent_settled_counts_read_folded_rows_as_the_rows_they_stand_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A driver may fold rows that share a queue, state and finish time into one `Settled` of n
    (Redis does): the window and the counts are those of the rows unfolded."""
    monkeypatch.setattr(rules, "RECENT_SETTLED_CAP", 3)
    folded = [
        rules.Settled("q", "done", NOW - 10, 1),
        rules.Settled("q", "done", NOW - 20, 5),
        rules.Settled("p", "done", NOW - 20, 1),
        rules.Settled("q", "done", NOW - 30, 2),
        rules.Settled("q", "cancelled", NOW - 25, 1),
        rules.Settled("q", "done", HOUR_AGO - 1, 4),
    ]
    unfolded = [rules.Settled(r.queue, r.state, r.finished_at) for r in folded for _ in range(r.n)]
    since = rules.recent_settled_start(folded, NOW)
    counted = rules.recent_settled_counts(folded, since)
    assert (since, dict(counted)) == (NOW - 20, {("q", "done"): 6, ("p", "done"): 1})
    assert rules.recent_settled_start(unfolded, NOW) == since
    assert rules.recent_settled_counts(unfolded, since) == counted
