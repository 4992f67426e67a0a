"""engine/reruns.py: the rerun transition as a pure function (every driver plans with it)."""

from __future__ import annotations

import pytest

from engine.errors import JobNotRetryableError, RerunStepUnknownError, RerunStepUnreachedError
from engine.reruns import can_rerun, plan_rerun
from schemas.jobs import JobRecord
from schemas.states import JOB_STATES
from schemas.steps import StepRecord


def _job(state: str = "dead") -> JobRecord:
    return JobRecord.model_validate(
        {
            "id": "j1",
            "run_id": "r1",
            "name": "n",
            "queue": "default",
            "tenant_id": None,
            "idempotency_key": "k",
            "input": {},
            "state": state,
            "attempt": 3,
            "max_attempts": 3,
            "run_at": 5,
            "queued_at": 5,
            "created_at": 1,
            "updated_at": 9,
            "finished_at": 9,
            "output": {"old": True},
        }
    )


def _step(name: str, status: str = "completed", at: int = 1) -> StepRecord:
    return StepRecord.model_validate(
        {"job_id": "j1", "run_id": "r1", "name": name, "status": status, "output": name,
         "started_at": at}
    )  # fmt: skip


STEPS = [_step("a"), _step("b"), _step("c", "failed")]


def test_rerunnable_states() -> None:
    assert [s for s in JOB_STATES if can_rerun(s, False)] == ["done", "failed", "dead"]
    assert can_rerun("cancelled", True) and not can_rerun("running", True)


def test_the_steps_before_the_point_move_to_the_new_run() -> None:
    plan = plan_rerun(_job(), STEPS, "c", False, "r2", 100)
    assert [(s.name, s.run_id, s.output) for s in plan.copied] == [
        ("a", "r2", "a"),
        ("b", "r2", "b"),
    ]
    r = plan.record
    assert (r.run_id, r.rerun_of, r.state, r.attempt, r.output) == ("r2", "r1", "ready", 0, None)
    assert (r.run_at, r.queued_at, r.updated_at, r.finished_at) == (100, 100, 100, None)
    assert plan.event_data == {
        "from": "dead",
        "from_step": "c",
        "previous_run_id": "r1",
        "run_id": "r2",
    }
    assert plan_rerun(_job("done"), STEPS, "a", False, "r2", 100).copied == []


def test_refusals() -> None:
    with pytest.raises(JobNotRetryableError):
        plan_rerun(_job("running"), STEPS, "a", False, "r2", 100)
    with pytest.raises(JobNotRetryableError):
        plan_rerun(_job("cancelled"), STEPS, "a", False, "r2", 100)
    with pytest.raises(RerunStepUnknownError) as unknown:
        plan_rerun(_job(), STEPS, "zzz", False, "r2", 100)
    assert unknown.value.details is not None and unknown.value.details["steps"] == ["a", "b", "c"]
    sleeping = [_step("a"), _step("nap", "sleeping"), _step("b")]
    with pytest.raises(RerunStepUnreachedError) as unreached:
        plan_rerun(_job(), sleeping, "b", False, "r2", 100)
    assert unreached.value.details is not None and unreached.value.details["first_open"] == "nap"
