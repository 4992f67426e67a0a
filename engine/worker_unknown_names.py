"""Jobs of a name this worker does not run: passed on to a live worker that runs it, or parked.

Two apps on one database may share a queue (`default`, most often), and then each claims the
other's jobs. A worker that claims a job it has no code for looks whether a live worker
publishes that name for that queue (engine.descriptors: refreshed within STALE_AFTER_MS, by a
worker other than this one). If one does, the job goes straight back, a shed (rule 7: ready, no
attempt, no error, its place in line kept), out of this worker's claims for PASS_ON_MS, twice
that each time this worker claims the same job again, up to the long park: a job that keeps
landing here costs a claim per that long at most, as a park did, and never spins. A tenth of a
poll is added: idle, this worker looks for work a whole number of polls after its hand-back, so
the job comes due just after one of its looks, and a worker polling to another beat is the
likelier to claim it first (with no delay past a poll, the worker that passed it on won nearly
every time). If none does,
it is parked as JOB_UNKNOWN for UNKNOWN_NAME_PARK_MS (engine.run_job), which `diagnose_queue`
reports (PARKED_UNKNOWN_NAME).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from engine.clock import Clock
from engine.descriptors import judged
from engine.drivers.base import DescriptorStore
from engine.errors import JobsError
from engine.run_job import UNKNOWN_NAME_PARK_MS
from schemas.jobs import JobRecord

logger = logging.getLogger("mcp_jobs.worker")

# How long a job passed on stays out of claims the first time: about two polls of the worker
# that runs it (500 ms each by default).
PASS_ON_MS = 1_000
# How long one look at a name's published descriptor holds.
LOOK_MS = 5_000
# Jobs whose passes this worker counts, and names whose look it keeps, at most.
REMEMBERED = 10_000


class UnknownNames:
    """What worker `worker_id` does with a job whose name it does not run: `pass_on_ms`."""

    def __init__(
        self, store: DescriptorStore | None, clock: Clock, worker_id: str, poll_ms: int
    ) -> None:
        self.store = store
        self.clock = clock
        self.worker_id = worker_id
        self.off_beat_ms = poll_ms // 10
        # Per job id, how often this worker passed it on; per (name, queue), the last look.
        self._passes: OrderedDict[str, int] = OrderedDict()
        self._looked: dict[tuple[str, str], tuple[int, bool]] = {}

    async def pass_on_ms(self, record: JobRecord) -> int | None:
        """How long to keep `record` out of claims as it goes back for the live worker that runs
        its name; None when no live worker does (it is parked)."""
        if not await self._run_elsewhere(record.name, record.queue):
            return None
        passes = self._passes.pop(record.id, 0)
        self._passes[record.id] = passes + 1
        if len(self._passes) > REMEMBERED:
            self._passes.popitem(last=False)
        return min(UNKNOWN_NAME_PARK_MS, PASS_ON_MS << min(passes, 20)) + self.off_beat_ms

    async def _run_elsewhere(self, name: str, queue: str) -> bool:
        """Whether a live worker other than this one publishes `name` on `queue`."""
        now = self.clock.now_ms()
        looked = self._looked.get((name, queue))
        if looked is not None and now - looked[0] < LOOK_MS:
            return looked[1]
        if self.store is None:
            return False  # no published descriptors: nothing can say another worker runs it
        try:
            published = await self.store.published_descriptors(name)
        except JobsError as exc:
            logger.warning("could not look who runs job %r, parking it: %s", name, exc)
            return False
        live = any(
            d.name == name
            and d.queue == queue
            and d.published_by != self.worker_id
            and not judged(d, now).stale
            for d in published
        )
        if len(self._looked) >= REMEMBERED:
            self._looked.clear()
        self._looked[(name, queue)] = (now, live)
        return live
