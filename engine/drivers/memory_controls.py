"""The memory driver's operator controls (#24): rate limits, pauses, progress, reruns and inbound
events, mixed into `MemoryDriver`. They keep their own state here and read and write the
driver's jobs, steps and events; every rule comes from its engine module, as the SQL drivers'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.errors import JobDuplicateError, JobSlotLostError
from engine.inbound_events import EventCursor, InboundEvent
from engine.inbound_events import matches as event_matches
from engine.inbound_events import order as event_order
from engine.pauses import PauseKey
from engine.rate_limits import (
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    states_with_prefix,
    take_held,
)
from engine.reruns import plan_rerun
from engine.rules import LIVE_STATES, DedupeKey, dedupe_key
from engine.settled_counts import tally
from schemas.jobs import JobRecord
from schemas.pauses import Pause, PauseKind
from schemas.progress import Progress
from schemas.stats import SettledCount
from schemas.steps import StepRecord

if TYPE_CHECKING:
    from engine.changes import ChangeFeed
    from engine.clock import Clock
    from engine.wake import Waker


class MemoryControls:
    if TYPE_CHECKING:
        # The driver's state and helpers these controls use (engine/drivers/memory.py).
        clock: Clock
        changes: ChangeFeed
        _waker: Waker
        _jobs: dict[str, JobRecord]
        _live: dict[DedupeKey, str]
        _steps: dict[str, dict[str, StepRecord]]
        _leases: dict[str, Any]

        def _find(self, job_id: str, tenant_id: str | None) -> JobRecord: ...
        def _held(self, job_id: str, token: str, *, running: bool = True) -> JobRecord: ...
        def _event(
            self,
            job: JobRecord,
            kind: str,
            now: int,
            data: dict[str, Any] | None,
            actor: str | None = None,
        ) -> None: ...
        async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    def __init__(self) -> None:
        self._pauses: dict[PauseKey, Pause] = {}
        self._rates: dict[str, RateState] = {}  # rate-limit key -> its TAT and rate
        self._reservations: dict[str, RateReservation] = {}  # job id -> its reserved start
        self._inbound: dict[str, InboundEvent] = {}
        self._waiters: dict[str, tuple[str, str, str | None]] = {}  # job id -> what it waits for

    # --- rate limits (engine.rate_limits) -----------------------------------------------------

    async def take_rates(
        self, takes: Sequence[RateTake], now: int, job_id: str | None = None, up_to: int = 1
    ) -> RateVerdict:
        return take_held(self._rates, self._reservations, takes, now, job_id, up_to)

    async def rate_states(self, limit: int, prefix: str = "") -> list[RateState]:
        return states_with_prefix(self._rates, prefix, limit)

    async def forget_idle_rates(self, tat_before: int, limit: int) -> int:
        idle = [k for k, state in self._rates.items() if state.tat < tat_before][:limit]
        for key in idle:
            del self._rates[key]
        return len(idle)

    async def rate_reservations(self, limit: int) -> list[RateReservation]:
        return sorted(self._reservations.values(), key=lambda r: (r.slot_at, r.job_id))[:limit]

    # --- pauses (engine.pauses) ---------------------------------------------------------------

    async def pause(
        self, kind: PauseKind, name: str, actor: str | None, reason: str | None, now: int
    ) -> tuple[Pause, bool]:
        found = self._pauses.get((kind, name))
        if found is not None:
            return found, True
        made = Pause(kind=kind, name=name, paused_by=actor, paused_at=now, reason=reason)
        self._pauses[(kind, name)] = made
        self.changes.notify()
        return made, False

    async def resume(self, kind: PauseKind, name: str) -> Pause | None:
        found = self._pauses.pop((kind, name), None)
        if found is not None:
            # Held jobs are claimable again: idle workers look now, not at their next poll.
            self._waker.notify()
            self.changes.notify()
        return found

    async def pauses(self) -> list[Pause]:
        return [self._pauses[k] for k in sorted(self._pauses)]

    # --- progress (engine.progress) -----------------------------------------------------------

    async def save_progress(self, job_id: str, token: str, progress: Progress) -> bool:
        try:
            job = self._held(job_id, token)
        except JobSlotLostError:
            return False
        self._jobs[job_id] = job.model_copy(update={"progress": progress})
        return True

    # --- settled counts (engine.settled_counts) ----------------------------------------------

    async def settled_counts(
        self, since_ms: int, until_ms: int, *, tenant_id: str | None = None
    ) -> dict[str, SettledCount]:
        return tally(self._jobs.values(), since_ms, until_ms, tenant_id)

    # --- reruns (engine.reruns) ---------------------------------------------------------------

    async def rerun(
        self,
        job_id: str,
        tenant_id: str | None,
        from_step: str,
        include_cancelled: bool,
        actor: str | None,
        new_run_id: str,
    ) -> JobRecord:
        job = self._find(job_id, tenant_id)
        now = self.clock.now_ms()
        # No await from this read to the writes below: two reruns cannot interleave.
        steps = sorted(self._steps.get(job.run_id, {}).values(), key=lambda s: s.started_at)
        plan = plan_rerun(job, steps, from_step, include_cancelled, new_run_id, now)
        key = dedupe_key(job.name, job.tenant_id, job.idempotency_key)
        holder = self._live.get(key)
        if holder is not None:
            raise JobDuplicateError(job.name, job.idempotency_key, holder, job.tenant_id)
        self._steps[new_run_id] = {step.name: step for step in plan.copied}
        self._jobs[job_id] = plan.record
        self._leases.pop(job_id, None)
        self._live[key] = job_id
        self._event(job, "requeued", now, plan.event_data, actor)
        self._waker.notify()
        self.changes.notify()
        return plan.record

    async def run_steps(self, job_id: str, run_id: str, tenant_id: str | None) -> list[StepRecord]:
        self._find(job_id, tenant_id)
        return [step for step in await self.load_steps(run_id) if step.job_id == job_id]

    # --- inbound events (engine.inbound_events) -----------------------------------------------

    async def send_event(self, event: InboundEvent, now: int) -> int:
        self._inbound[event.id] = event
        target = (event.name, event.key, event.tenant_id)
        woken = 0
        for job_id, waiting in self._waiters.items():
            if waiting == target and await self.wake_waiter(job_id, now):
                woken += 1
        return woken

    async def first_event(
        self,
        name: str,
        key: str,
        tenant_id: str | None,
        started_at: int,
        after: EventCursor | None,
    ) -> InboundEvent | None:
        found = [
            e
            for e in self._inbound.values()
            if event_matches(e, name, key, tenant_id, started_at, after)
        ]
        return min(found, key=event_order, default=None)

    async def await_event(self, job_id: str, name: str, key: str, tenant_id: str | None) -> None:
        self._waiters[job_id] = (name, key, tenant_id)

    async def forget_waiter(self, job_id: str) -> None:
        self._waiters.pop(job_id, None)

    async def wake_waiter(self, job_id: str, now: int) -> bool:
        job = self._jobs.get(job_id)
        if job is None or job.state != "suspended":
            return False
        if job.run_at > now:
            woken = {"run_at": now, "queued_at": min(job.queued_at, now)}
            self._jobs[job_id] = job.model_copy(update=woken)
            self._waker.notify()
            self.changes.notify()
        return True

    async def prune_events(self, now: int) -> int:
        expired = [i for i, e in self._inbound.items() if e.expires_at <= now]
        for event_id in expired:
            del self._inbound[event_id]
        for job_id in list(self._waiters):
            job = self._jobs.get(job_id)
            if job is None or job.state not in LIVE_STATES:
                del self._waiters[job_id]
        return len(expired)
