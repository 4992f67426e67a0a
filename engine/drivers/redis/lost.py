"""Why a holder's token no longer holds its job, as the settle scripts answer it: its lease moved
on (JOB_SLOT_LOST), or the job's hash is gone (`JobGoneError`). A job this process holds can only
be gone if the store lost it: a server restarted with no persistence, FLUSHDB, another program
deleting keys. That is logged as an ERROR, saying whether the store's version key went with it
(a reset), at most once a minute: a reset refuses every settle and heartbeat of every job held.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis

from engine.clock import Clock
from engine.drivers.holding import jobs_named
from engine.drivers.job_gone import JobGoneError
from engine.drivers.redis.keys import Keys
from engine.errors import JobSlotLostError

logger = logging.getLogger("mcp_jobs.redis")

# How long (of the jobs' clock) after one alarm the next waits.
QUIET_MS = 60_000


# Said by the ERROR of a reset this process's beat installed the prefix again after.
_REINSTALLED = (
    ". This process installed the prefix again (its version key, as `mcp-jobs db migrate` "
    "does), so the CLI reads it and the jobs enqueued since are kept; each cron task's last "
    "fired occurrence went with the reset, so its scheduler fires it on from the one it knows "
    "fired, else from now, and says which"
)


class LostJobs:
    """Tells lost leases from gone jobs for the driver's settles and heartbeats, and sounds the
    alarm when jobs are gone. `report`: the line that shows the server's persistence."""

    def __init__(self, client: Redis, keys: Keys, clock: Clock, report: str) -> None:
        self._client = client
        self._keys = keys
        self._clock = clock
        self._report = report
        self._quiet_until: int | None = None
        # The store's epoch token as this process last saw it: a reset is its change.
        self._epoch: str | None = None

    async def refusals(self, lost: Sequence[tuple[str, bool]]) -> list[JobSlotLostError]:
        """The refusal of each job (id, and whether it is gone) whose token no longer holds
        it, in order."""
        gone = [job_id for job_id, is_gone in lost if is_gone]
        if gone:
            await self._alarm(gone)
        return [
            JobGoneError(job_id) if is_gone else JobSlotLostError(job_id)
            for job_id, is_gone in lost
        ]

    async def refusal(self, job_id: str, *, gone: bool) -> JobSlotLostError:
        (refused,) = await self.refusals([(job_id, gone)])
        return refused

    async def look(self, there: bool, epoch: str | None, *, reinstalled: bool = False) -> None:
        """At a presence beat, given whether the store's version key is `there` and its epoch
        key's token (read in the beat's own round trip): the ERROR of a reset under a process
        that held none of the jobs it lost (no settle of its would be refused), once per reset.
        A store's epoch key holds a token written once (here, where the version key is there
        and it is not); one other than this process saw means the store was emptied since, even
        where another process opened it again meanwhile (its migrate writes the version key
        back, not the old token). `reinstalled`: this beat found the version key gone and
        wrote it back (the driver's `worker_seen`)."""
        client, keys = self._client, self._keys
        if epoch is None and there:
            await client.set(keys.epoch, secrets.token_hex(8), nx=True)
            epoch = cast(str | None, await client.get(keys.epoch))  # decode_responses
        seen, self._epoch = self._epoch, epoch
        if seen is None or epoch == seen or self._quiet():
            return
        logger.error(
            "redis: the store under prefix %s appears to have been reset: its epoch key %s no "
            "longer holds the token this process saw (the version key %s went with it). A "
            "server restarted with neither AOF nor RDB save points comes back empty (as after "
            "FLUSHDB): every job stored there is lost, though this process held none of them "
            "(%s shows the server's persistence)%s",
            keys.prefix,
            keys.epoch,
            keys.version,
            self._report,
            _REINSTALLED if reinstalled else "",
        )

    def _quiet(self) -> bool:
        """Whether an alarm was sounded within QUIET_MS; if not, one is now."""
        now = self._clock.now_ms()
        if self._quiet_until is not None and now < self._quiet_until:
            return True
        self._quiet_until = now + QUIET_MS
        return False

    async def _alarm(self, gone: Sequence[str]) -> None:
        if self._quiet():
            return
        jobs = jobs_named(gone)
        prefix = self._keys.prefix
        if await self._client.exists(self._keys.version):
            logger.error(
                "redis: %s held by this process %s gone from the store under prefix %s: "
                "another program deleted them, or the store was reset and opened again since; "
                "their results were not written (%s shows the server)",
                jobs,
                "is" if len(gone) == 1 else "are",
                prefix,
                self._report,
            )
            return
        logger.error(
            "redis: the store under prefix %s appears to have been reset: %s held by this "
            "process %s gone, and the version key %s with them. A server restarted with "
            "neither AOF nor RDB save points comes back empty (as after FLUSHDB): every job "
            "stored there is lost, and the results of these were not written (%s shows the "
            "server's persistence)",
            prefix,
            jobs,
            "is" if len(gone) == 1 else "are",
            self._keys.version,
            self._report,
        )


__all__ = ["QUIET_MS", "LostJobs"]
