"""Statuses are runtime lists that types derive from (rule 5)."""

from __future__ import annotations

from schemas.states import JOB_STATES, LIVE_STATES, SETTLED_STATES, STEP_STATUSES


def test_status_vocabularies_are_runtime_lists() -> None:
    assert set(LIVE_STATES) | set(SETTLED_STATES) == set(JOB_STATES)
    assert not set(LIVE_STATES) & set(SETTLED_STATES)
    assert "completed" in STEP_STATUSES
