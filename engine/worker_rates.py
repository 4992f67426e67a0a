"""A worker's side of rate limits (engine/rate_limits.py): the take before a job starts, the shed
of a job over one, and a timer that wakes the worker at each start it reserved for a job it shed,
so reserved jobs start at their slot rather than at the worker's next poll."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from engine.clock import Clock
from engine.declare import JobDefinition
from engine.drivers.base import RATES, Driver, RateStore, require
from engine.errors import JobSlotLostError
from engine.limits import Limits
from engine.observe import WorkerEvent
from engine.rate_limits import kind_of, takes_for
from engine.worker_events import WorkerEvents
from schemas.jobs import ClaimedJob, JobRecord, NackOptions

# At most this many reserved starts wait in one worker's timer (a few MB): jobs shed beyond them
# are found by the next poll instead, up to poll_ms late.
RATE_WAKES_MAX = 65_536
# A take asks for up to this many starts at once, never more than a quarter of the narrowest
# burst (the rest stays for other workers): one locked write then serves waves of claimed jobs,
# where a write per start serialised every start of a key on its row.
SPARES_MAX = 256
# Starts taken ahead are used within this long, or dropped: each was counted as started when it
# was taken, so one held longer would let a later burst exceed the limit's.
SPARE_TTL_MS = 100


def rate_reason(key: str, next_start_at: int, now: int) -> str:
    """The log reason of a rate shed: the key, and when (epoch ms, and how soon) it may start."""
    return f"over rate {key}: next start at {next_start_at} (in {next_start_at - now} ms)"


class RateGate:
    """Takes starts for one worker's jobs and wakes it (`poke`) at the starts it reserved.
    `idle` says whether the worker's loop is waiting for work right now."""

    def __init__(
        self,
        driver: Driver,
        clock: Clock,
        limits: Limits,
        poke: Callable[[], None],
        idle: Callable[[], bool],
    ) -> None:
        self.driver = driver
        self.clock = clock
        self.limits = limits
        self._poke = poke
        self._idle = idle
        # Read once: a job with no rate limit anywhere pays one attribute test, no store call.
        self._configured = limits.has_rates
        # The rate store, required when the first job with a rate limit is taken.
        self._store: RateStore | None = require(driver, RATES) if self._configured else None
        # Reserved starts (epoch ms, a heap) of jobs this worker shed.
        self._wakes: list[int] = []
        self._timer: anyio.CancelScope | None = None
        # A reserved start came due while the loop was busy: its next idle wait returns at once.
        self._due = False
        # Starts taken ahead, per set of keys: how many, and until when (epoch ms) they hold.
        # In the order they were taken, so the oldest (the first to lapse) are at the front.
        self._spares: dict[tuple[str, ...], tuple[int, int]] = {}
        # The take in flight per set of keys: the jobs of a claimed wave wait for it and start
        # on its spares instead of each locking the keys' rows in turn.
        self._taking: dict[tuple[str, ...], asyncio.Event] = {}

    def applies(self, definition: JobDefinition[Any]) -> bool:
        return definition.rate_limit is not None or self._configured

    async def take(
        self, record: JobRecord, definition: JobDefinition[Any]
    ) -> tuple[str, int] | None:
        """Take a start under every rate limit of `record`: None when it may start now (or no
        limit applies), else the key holding it back and its reserved start (remembered)."""
        takes = takes_for(
            record.name,
            definition.rate_limit,
            lambda: definition.parse_input(record.input),
            record.queue,
            self.limits.rate_per_queue.get(record.queue),
            record.tenant_id,
            self.limits.tenant_rate(record.tenant_id),
        )
        if not takes:
            return None
        keys = tuple(t.key for t in takes)
        while (taking := self._taking.get(keys)) is not None:
            await taking.wait()
        # Read after the wait for the take in flight: a `now` read before it (tens of ms on a
        # busy server) took the start that much earlier than the body began.
        now = self.clock.now_ms()
        if self._use_spare(keys, now):
            return None
        if self._store is None:
            self._store = require(self.driver, RATES)
        up_to = max(1, min(SPARES_MAX, min(t.burst for t in takes) // 4))
        taking = self._taking[keys] = asyncio.Event()
        try:
            verdict = await self._store.take_rates(takes, now, record.id, up_to)
        finally:
            del self._taking[keys]
            taking.set()
        key = verdict.blocked_key
        if key is None:
            if verdict.spare:
                self._forget_lapsed_spares(now)
                self._spares[keys] = (verdict.spare, now + SPARE_TTL_MS)
            if record.run_at > record.queued_at:
                # It waited for its turn (a shed's run_at is its reserved slot): a backlog's
                # next turn is one interval on (from now, when it started on a slot it adopted).
                # Woken then, a worker that did not shed them (started as the one that did
                # stopped) claims each at its turn, not at its polls.
                interval = max(-(-t.per_ms // t.limit) for t in takes)
                turn = record.run_at + interval
                self._wake_at(turn if turn > now else now + interval)
            return None
        self._wake_at(verdict.next_start_at)
        return key, verdict.next_start_at

    def _wake_at(self, at: int) -> None:
        if len(self._wakes) < RATE_WAKES_MAX:
            heapq.heappush(self._wakes, at)
            if self._wakes[0] == at and self._timer is not None:
                self._timer.cancel()  # an earlier wake than the timer's: re-aim it

    async def shed_over(
        self, claimed: ClaimedJob, definition: JobDefinition[Any], events: WorkerEvents
    ) -> bool:
        """Take a start under every rate limit of this job; over one, shed it like a cap
        (rule 7) until its next allowed start, say so to `events`, and answer True. Slots it
        took are released by the nack that hands it back."""
        record = claimed.record
        held = await self.take(record, definition)
        if held is None:
            return False
        key, next_start_at = held
        # From the clock now, not the take's: the nack adds the delay to its own now, and a job
        # back later than its slot is claimed at the next wake-up, an interval on, past its
        # reservation.
        now = self.clock.now_ms()
        delay = max(1, next_start_at - now)
        try:
            await self.driver.nack(
                record.id, claimed.token, NackOptions(delay_ms=delay, counts_as_attempt=False)
            )
        except JobSlotLostError:
            return True  # cancelled or taken meanwhile: no longer ours to hand back
        event = WorkerEvent.of(
            "shed",
            record,
            at=now,
            worker_id=events.worker_id,
            reason=rate_reason(key, next_start_at, now),
            cap_kind="rate",
        )
        events.emit(replace(event, rate_kind=kind_of(key)))
        return True

    def _use_spare(self, keys: tuple[str, ...], now: int) -> bool:
        """Start on a start taken ahead over exactly these keys, while one is left and fresh."""
        held = self._spares.get(keys)
        if held is None:
            return False
        count, until = held
        if now > until:
            del self._spares[keys]
            return False
        if count > 1:
            self._spares[keys] = (count - 1, until)
        else:
            del self._spares[keys]
        return True

    def _forget_lapsed_spares(self, now: int) -> None:
        """Drop the spares that lapsed unused, oldest first: keys are as many as the inputs'
        sub-keys and tenants, and one never seen again would otherwise be held for ever."""
        while self._spares:
            keys = next(iter(self._spares))
            if self._spares[keys][1] >= now:
                return
            del self._spares[keys]

    async def run(self) -> None:
        """Wake the worker at each reserved start, earliest first, on the injected clock;
        `take` cancels the wait when it adds an earlier one."""
        while True:
            with anyio.CancelScope() as scope:
                self._timer = scope
                if self._wakes:
                    await self.clock.sleep_ms(self._wakes[0] - self.clock.now_ms())
                else:
                    await anyio.sleep_forever()
            self._timer = None
            if scope.cancel_called:
                continue
            now = self.clock.now_ms()
            while self._wakes and self._wakes[0] <= now:
                heapq.heappop(self._wakes)
            if not self._idle():
                self._due = True
            self._poke()

    def came_due_while_busy(self) -> bool:
        """Whether a reserved start came due while the loop was busy (and forget it)."""
        due, self._due = self._due, False
        return due
