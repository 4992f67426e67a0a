"""What keeps a claimed job from starting in this worker, checked before its body runs: a name
the worker does not run (handed on to a live worker that does, or parked), a full concurrency
cap (worker_caps) and a rate limit (worker_rates). Each hands the job back in its place, with
no attempt spent (rule 7)."""

from __future__ import annotations

from typing import Any

from engine.declare import JobDefinition
from engine.drivers.base import Driver
from engine.limits import Limits
from engine.worker_caps import CapRoom, shed_at_cap
from engine.worker_events import WorkerEvents
from engine.worker_hand_back import give_back
from engine.worker_rates import RateGate
from engine.worker_unknown_names import UnknownNames
from schemas.jobs import ClaimedJob, NackOptions


class StartGate:
    def __init__(
        self,
        driver: Driver,
        events: WorkerEvents,
        limits: Limits,
        caps: CapRoom,
        rates: RateGate,
        unknown_names: UnknownNames,
    ) -> None:
        self.driver = driver
        self.events = events
        self.limits = limits
        self.caps = caps
        self.rates = rates
        self.unknown_names = unknown_names

    async def turned_away(
        self, claimed: ClaimedJob, definition: JobDefinition[Any] | None, shed_delay_ms: int
    ) -> bool:
        """Whether `claimed` went back instead of starting here. `definition`: its job as
        registered with this worker (None: a name it does not run); `shed_delay_ms`: the delay
        a job shed at a cap goes back with."""
        record = claimed.record
        if definition is None:
            delay = await self.unknown_names.pass_on_ms(record)
            if delay is None:
                return False  # no live worker runs it either: it starts here and is parked
            await give_back(
                self.driver,
                self.events,
                claimed,
                NackOptions(delay_ms=delay, counts_as_attempt=False),
                "handed_back",
                f"job {record.name!r} is not registered here; a live worker runs it",
            )
            return True
        caps = self.limits.caps_for(
            record.queue, record.tenant_id, record.name, definition.concurrency
        )
        if caps and await shed_at_cap(
            self.caps, self.driver, self.events, claimed, caps, shed_delay_ms
        ):
            return True
        return self.rates.applies(definition) and await self.rates.shed_over(
            claimed, definition, self.events
        )
