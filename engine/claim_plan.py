"""How many jobs a worker may claim now: its slots, the jobs it claims ahead, and their pace.

Pure arithmetic over the worker's counts, no I/O and no clock, so each case has a unit test.
A worker holds jobs in three conditions: a body running (`bodies`), claimed ahead and waiting
for a slot (`waiting`), and a body over with its settle write on its way (the rest of `held`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Jobs claimed ahead wait for a slot; a worker claims ahead only as many as its slots are
# expected to start within this long, judged by how long its recent bodies ran. Jobs of a
# second or more are not claimed ahead at all, so a busy worker does not sit on work another
# worker could start now (nor, killed, leave it to a lease). Until a body has finished, the
# pace is unknown and nothing is claimed ahead.
PREFETCH_HORIZON_MS = 50
# Claimed jobs that may wait for a slot, by default, for each slot.
PREFETCH_PER_SLOT = 2
# Weight of the newest body's duration in the running mean.
BODY_MS_WEIGHT = 0.1


@dataclass
class ClaimPlanner:
    """The claim sizes of one worker with `concurrency` slots and up to `prefetch` jobs waiting.

    `held` counts every job the worker holds (running, waiting, settling); `claiming` the jobs
    asked for by claims still on their way."""

    concurrency: int
    prefetch: int
    # Running mean of body durations (ms): sizes the claim-ahead, once a body has finished
    # (`paced`); the first one sets it, so one long body stops the claim-ahead at once.
    body_ms: float = 0.0
    paced: bool = False

    @property
    def claim_batch(self) -> int:
        """The smallest claim worth making ahead of need."""
        return max(1, self.concurrency // 4)

    def body_finished(self, duration_ms: float) -> None:
        if not self.paced:
            self.paced = True
            self.body_ms = duration_ms
            return
        self.body_ms += (duration_ms - self.body_ms) * BODY_MS_WEIGHT

    def prefetch_now(self) -> int:
        """Jobs that may wait for a slot: as many as the slots are expected to start within
        PREFETCH_HORIZON_MS at the recent bodies' pace, at most `prefetch`; none before a body
        has finished."""
        if not self.paced:
            return 0
        if self.body_ms <= 0:
            return self.prefetch
        expected = int(self.concurrency * PREFETCH_HORIZON_MS / self.body_ms)
        return min(self.prefetch, expected)

    def free_slots(self, bodies: int, held: int, waiting: int) -> int:
        """Slots for bodies now, bounded so that no more than `concurrency` settle writes are on
        their way at once."""
        settling = held - bodies - waiting
        return min(self.concurrency - bodies, 2 * self.concurrency - bodies - settling)

    def claim_room(self, bodies: int, held: int, waiting: int, claiming: int) -> int:
        """How many jobs a claim made now may ask for: the free slots, plus as many as may wait
        for one (`prefetch_now`), less what is waiting already or asked for by claims on their
        way. One claim asks for at most `concurrency`, and no more than `concurrency` settle
        writes may be on their way besides."""
        prefetch = self.prefetch_now()
        room = self.concurrency - bodies + prefetch - waiting - claiming
        return min(room, self.concurrency, 2 * self.concurrency + prefetch - held - claiming)
