"""A driver states what it offers by the capabilities it implements; the engine asks first."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, ManualClock
from engine.backfill import Backfills
from engine.drivers import CAPABILITIES, capabilities
from engine.drivers.memory import MemoryDriver
from engine.errors import JobsError
from engine.tasks.scheduler import Scheduler


class Without:
    """`inner` with every method of one capability missing."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith(self._prefix):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_the_built_in_memory_driver_offers_every_capability() -> None:
    assert capabilities(MemoryDriver(ManualClock())) == {c.name for c in CAPABILITIES}


@pytest.mark.drivers("memory")
async def test_backfills_on_a_driver_without_a_ledger_is_a_typed_refusal(jobs: Jobs) -> None:
    jobs.driver = Without(jobs.driver, "backfill_")
    assert "backfill_ledger" not in capabilities(jobs.driver)
    with pytest.raises(JobsError) as raised:
        Backfills(jobs)
    assert raised.value.code == "DRIVER_CAPABILITY_MISSING"
    assert raised.value.details is not None
    assert raised.value.details["capability"] == "backfill_ledger"
    assert raised.value.details["missing"] == ["backfill_runs", "backfill_save"]


@pytest.mark.drivers("memory")
async def test_a_scheduler_on_a_driver_without_scheduler_state_is_a_typed_refusal(
    jobs: Jobs,
) -> None:
    jobs.driver = Without(jobs.driver, "task_")
    with pytest.raises(JobsError) as raised:
        Scheduler(jobs)
    assert raised.value.code == "DRIVER_CAPABILITY_MISSING"
    assert raised.value.details is not None and raised.value.details["capability"] == "scheduler"
