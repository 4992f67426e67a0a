"""A worker's view of its caps (engine/limits.py) between claims: which are full, so that its
claims walk past their jobs (`ClaimExclusion`) to the others' instead of claiming and shedding
the same capped jobs again and again.

The slots in the database decide (`Driver.acquire_slots`); this is what the worker has learned:
- the slots it holds itself, per cap key: at the cap, the key is full without asking;
- a key the database refused (its slots held by other workers too): full for `hint_ms`, or
  until one of this worker's own jobs under that key ends.
A job still claimed over a full cap is shed in its place (rules.nack_transition): a cap never
reorders a queue, and a tenant or name at its cap never holds back the jobs behind it.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.clock import Clock
from engine.drivers.base import Driver
from engine.limits import GLOBAL_CAP
from engine.worker_events import WorkerEvents
from engine.worker_hand_back import cap_kind, give_back
from schemas.jobs import ClaimedJob, ClaimExclusion, NackOptions

# Claims a contended cap's room may limit in a row with none of its jobs among them.
CONTENDED_CLAIMS = 3


class CapRoom:
    def __init__(self, clock: Clock, hint_ms: int) -> None:
        self.clock = clock
        self.hint_ms = hint_ms
        # Per key: (slots this worker holds or is asking the database for, the cap).
        self._held: dict[str, tuple[int, int]] = {}
        # The keys each job of this worker holds or asks for.
        self._by_job: dict[str, list[str]] = {}
        # Keys the database refused, and until when (epoch ms) they count as full.
        self._refused: dict[str, int] = {}
        # Keys that were full and freed since the last claim: that claim asks for no more jobs
        # than this, so a freed slot does not claim a batch of the capped jobs to shed again.
        self._lifted = 0
        # Set with each lift, until the next claim: a lift while a claim was on its way
        # claims again before the worker waits for work (`wake_due`).
        self._wake = False
        # Slots this worker let go, ever: a refusal that crossed one of them may be stale.
        self._releases = 0
        # Keys whose jobs a claim brought over the cap (shed here): their jobs lead the line,
        # so while such a key has room, a claim asks for no more than that room. Each counts
        # the claims it limited since one of its jobs came; after CONTENDED_CLAIMS it is let go.
        self._contended: dict[str, int] = {}

    def reserve(self, job_id: str, caps: Sequence[tuple[str, int]]) -> str | None:
        """Count `job_id` under each of `caps` before the database is asked, so that the jobs
        claimed with it (and the claims made meanwhile) see the cap full: the best-ranked job
        asks first. The first key already full instead: the job is shed without asking."""
        now = self.clock.now_ms()
        full = next((key for key, _ in caps if self._is_full(key, now)), None)
        if full is not None:
            self._contended[full] = 0
            return full
        for key, cap in caps:
            held = self._held.get(key)
            self._held[key] = (1 if held is None else held[0] + 1, cap)
            if key in self._contended:
                self._contended[key] = 0
        self._by_job[job_id] = [key for key, _ in caps]
        return None

    def asking(self) -> int:
        """A mark to pass to `refused`, taken before the database is asked for slots."""
        return self._releases

    def refused(self, job_id: str, key: str, mark: int) -> None:
        """The database found `key` at its cap: `job_id` holds nothing. When this worker let a
        slot go while it asked, the answer may already be stale and is not kept."""
        stale = mark != self._releases
        self._let_go(job_id, refused=key)
        if stale:
            self._lift()
        else:
            self._refused[key] = self.clock.now_ms() + self.hint_ms
            self._contended[key] = 0  # its jobs lead this worker's line: probe it one at a time

    def wake_due(self) -> bool:
        """Whether a full cap was lifted since the last claim was made."""
        return self._wake

    def _lift(self) -> None:
        self._lifted += 1
        self._wake = True

    def released(self, job_id: str) -> None:
        """`job_id`'s run ended here: its slots were let go with its settle (or its lease)."""
        self._let_go(job_id, refused=None)

    def _let_go(self, job_id: str, refused: str | None) -> None:
        """Uncount `job_id`: its slots released, or (`refused`, the key the database refused)
        never taken. A key it filled is lifted, but the refused one; a release may also have
        made room under a key the database refused, so its refusal is forgotten."""
        keys = self._by_job.pop(job_id, None)
        if keys is None:
            return
        if refused is None:
            self._releases += 1
        for key in keys:
            count, cap = self._held.pop(key)
            was_full = count >= cap
            if refused is None:
                was_full = self._refused.pop(key, None) is not None or was_full
            if count > 1:
                self._held[key] = (count - 1, cap)
            if was_full and key != refused:
                self._lift()

    def claim_limit(self, free: int) -> int:
        """How many jobs the next claim asks for, of the `free` slots: none while the global cap
        is full, only as many as were freed right after a full cap let a job go, and no more than
        the room under a cap whose jobs lead the line."""
        self._wake = False
        if self._is_full(GLOBAL_CAP, self.clock.now_ms()):
            return 0
        if self._lifted:
            free, self._lifted = min(free, self._lifted), 0
        now = self.clock.now_ms()
        for key in list(self._contended):
            if self._is_full(key, now):
                continue  # excluded from the claim instead
            self._contended[key] += 1
            if self._contended[key] > CONTENDED_CLAIMS:
                del self._contended[key]  # its jobs no longer lead the line
                continue
            held = self._held.get(key)
            # Room under the cap as this worker counts it; one job to probe a cap the database
            # last found full with none of it here (held elsewhere).
            free = min(free, 1 if held is None else held[1] - held[0])
        return free

    def exclusion(self) -> ClaimExclusion | None:
        """What the next claim leaves alone: the queues, names and tenants whose cap is full."""
        if not self._refused and not self._held:
            return None
        now = self.clock.now_ms()
        for key in [key for key, until in self._refused.items() if until <= now]:
            del self._refused[key]
        queues: set[str] = set()
        names: set[str] = set()
        tenants: set[str] = set()
        full = [key for key, (count, cap) in self._held.items() if count >= cap]
        for key in (*full, *self._refused):
            kind, _, name = key.partition(":")
            if kind == "queue":
                queues.add(name)
            elif kind == "job":
                names.add(name)
            elif kind == "tenant":
                tenants.add(name)
        if not (queues or names or tenants):
            return None
        return ClaimExclusion(frozenset(queues), frozenset(names), frozenset(tenants))

    def _is_full(self, key: str, now: int) -> bool:
        held = self._held.get(key)
        if held is not None and held[0] >= held[1]:
            return True
        until = self._refused.get(key)
        return until is not None and until > now


async def shed_at_cap(
    room: CapRoom,
    driver: Driver,
    events: WorkerEvents,
    claimed: ClaimedJob,
    caps: Sequence[tuple[str, int]],
    delay_ms: int,
) -> bool:
    """Take `claimed`'s slots under `caps`, or else shed it: True when it went back. Straight
    back, not parked and no `last_error`: a job still waiting, that depth and oldest-ready age
    must keep seeing (rule 7)."""
    record = claimed.record
    blocked = room.reserve(record.id, caps)
    if blocked is None:
        mark = room.asking()
        blocked = await driver.acquire_slots(record.id, caps, claimed.lease_expires_at)
        if blocked is None:
            return False
        room.refused(record.id, blocked, mark)
    options = NackOptions(delay_ms=delay_ms, counts_as_attempt=False)
    reason = f"at cap {blocked}"
    await give_back(driver, events, claimed, options, "shed", reason, cap_kind=cap_kind(blocked))
    return True
