"""The transactional outbox: jobs staged in the application's own transaction, and the relay
that publishes them.

`jobs.stage(tx, job, input)` writes an outbox row through the application's open transaction
(an asyncpg connection inside `conn.transaction()`, a sqlite3 or aiosqlite connection after
`BEGIN`, or a MemoryDriver `driver.transaction()`), so the job exists if and only if that
transaction commits.

The relay turns committed rows into jobs: it claims a batch in the total order `(staged_at, id)`
under a fresh token per claim, publishes the rows that claim still owns (enqueue + mark
published, first writer wins, one transaction), and releases what it could not publish. A relay
that dies mid-batch releases nothing; its rows are claimable again once its claim lease expires,
and its stale token can no longer publish or release them. `Worker` runs one in-process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from engine.errors import InvalidArgumentError, JobsError
from engine.ids import new_token, worker_id
from engine.services import ServiceLoop, attempt
from schemas.jobs import EnqueueResult
from schemas.outbox import OutboxRow

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.outbox")

DEFAULT_BATCH_SIZE = 100
DEFAULT_CLAIM_LEASE_MS = 30_000
RELAY_POLL_MS = 1_000
# A published row says what its staged job became (`job_id`) for this long, then the pruner
# deletes it: the outbox holds what is waiting and what went lately, not every row ever staged.
PUBLISHED_KEEP_MS = 7 * 86_400_000


@dataclass(frozen=True)
class PublishedBatch:
    """One claim: the rows taken in `(staged_at, id)` order and the jobs published from them
    (fewer when another relay published some first, or a row failed and was released)."""

    relay_id: str
    token: str
    rows: list[OutboxRow]
    results: list[EnqueueResult]
    released: list[str]
    # Why each released row was refused, in `released`'s order.
    refusals: list[JobsError] = field(default_factory=list[JobsError])

    @property
    def refused_all(self) -> bool:
        """Every row was handed back: no progress, and claiming again at once would take the
        same rows while the cause lasts."""
        return bool(self.rows) and len(self.released) == len(self.rows)


class OutboxRelay(ServiceLoop):
    """Publishes staged outbox rows as jobs, batch by batch. `Worker` runs one by default."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        lease_ms: int = DEFAULT_CLAIM_LEASE_MS,
        poll_ms: int = RELAY_POLL_MS,
        relay_id: str | None = None,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("lease_ms", lease_ms),
            ("poll_ms", poll_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(name, value, "a whole number ≥ 1")
        self.jobs = jobs
        self.driver = jobs.driver
        self.clock = jobs.clock
        self.batch_size = batch_size
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.id = relay_id or f"relay:{worker_id()}"
        super().__init__()

    async def pass_once(self) -> PublishedBatch | None:
        """Claim one batch and publish it; None when nothing is waiting."""
        # A fresh token per claim, not per relay: two claims by one relay must not fence as one.
        token = new_token()
        rows = await self.driver.outbox_claim(self.id, token, self.batch_size, self.lease_ms)
        if not rows:
            return None
        try:
            results = await self.driver.outbox_publish(token, rows)
            released: list[str] = []
            refusals: list[JobsError] = []
        except JobsError as exc:
            logger.warning("outbox batch of %d failed, publishing one by one: %s", len(rows), exc)
            results, released, refusals = await self._one_by_one(token, rows)
        except BaseException:
            # Cancelled or crashed mid-publish: hand back what this claim still owns (published
            # rows are not touched) rather than leave it until the lease runs out.
            with anyio.CancelScope(shield=True):
                await self._hand_back(token, [r.id for r in rows])
            raise
        return PublishedBatch(self.id, token, rows, results, released, refusals)

    async def _one_by_one(
        self, token: str, rows: list[OutboxRow]
    ) -> tuple[list[EnqueueResult], list[str], list[JobsError]]:
        """Isolate the row that broke the batch, so one bad row does not hold back the rest."""
        results: list[EnqueueResult] = []
        released: list[str] = []
        refusals: list[JobsError] = []
        for row in rows:
            try:
                results.extend(await self.driver.outbox_publish(token, [row]))
            except JobsError as exc:
                logger.error("outbox row %s (%s) not published: %s", row.id, row.request.name, exc)
                await self._hand_back(token, [row.id])
                released.append(row.id)
                refusals.append(exc)
        return results, released, refusals

    async def _hand_back(self, token: str, ids: list[str]) -> None:
        try:
            await self.driver.outbox_release(token, ids)
        except JobsError as exc:
            logger.warning("outbox rows not released (claimable on lease expiry): %s", exc)

    async def run_until_empty(self) -> int:
        """Publish until no row is waiting; how many jobs were published. For scripts/tests.
        Raises the refusal when a claim published nothing (its rows stay waiting): claiming
        them again at once would spin for as long as the cause lasts."""
        published = 0
        while (batch := await self.pass_once()) is not None:
            published += len(batch.results)
            if batch.refused_all and batch.refusals:
                raise batch.refusals[0]
        return published

    async def _turn(self) -> None:
        """A batch; a full one is followed at once by the next, else a wait of `poll_ms`."""
        batch = await attempt("outbox relay pass", logger, self.pass_once)
        # A full batch handed back whole (the jobs table refused every row) is no progress: the
        # next claim would take the same rows at once, spinning while the cause lasts.
        if batch is not None and len(batch.rows) == self.batch_size and not batch.refused_all:
            await anyio.lowlevel.checkpoint()
            return
        await self._sleep(self.poll_ms)
